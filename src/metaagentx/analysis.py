"""What the designer learned and where the gain came from: pure functions over run outputs.

    metaagentx report RUN_DIR [--compare OTHER]   # uses everything below

Inputs are the files of a run folder (see the layout in ``metaagentx.report``):
``metrics.jsonl`` (one object per training step), ``eval/<label>/items.jsonl`` (one object
per evaluated task sample) and ``samples/step_XXXXXX.jsonl`` (training episodes). Readers
tolerate a truncated last line (a run killed mid-write); any other bad line is an error
naming the file and line. Every analysis takes plain item dicts and returns plain values:

- ``structure_distribution``: per benchmark, how many items used each structure, the
  structure classified from the script (``metaagentx.mas.structure``), not from the model;
- ``attribution``: per task, solved before/after -> ``execution`` (newly solved with the
  same structure), ``design`` (newly solved with a different one), ``newly_failed``,
  ``both_solved``, ``both_failed``;
- ``diversity``: distinct role names, fraction of agents whose system prompt no other agent
  of the same system shares, calls per execution;
- ``cost_by_structure``: items, tasks, accuracy, tokens and calls per task for each structure;
- ``paper_table``: accuracy in the paper's layout (AIME24 ... CodeContests, Avg.).
"""

from __future__ import annotations

import functools
import json
import re
import warnings
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from metaagentx.mas.structure import STRUCTURES, classify_structure

PAPER_BENCHMARKS = ("aime24", "aime25", "olympiadbench", "livecodebench", "apps", "codecontests")
PAPER_COLUMNS = {
    "aime24": "AIME24",
    "aime25": "AIME25",
    "olympiadbench": "OlympiadBench",
    "livecodebench": "LiveCodeBench",
    "apps": "APPS",
    "codecontests": "CodeContests",
}
# Quoted from the MetaAgent-X paper (Qwen3-8B, average over its six benchmarks, in %).
PAPER_REFERENCE: dict[str, dict[str, float]] = {
    "MetaAgent-X, Qwen3-8B (quoted from the paper)": {"avg": 38.33},
    "Single agent, Qwen3-8B (quoted from the paper)": {"avg": 27.16},
}
OUTCOMES = ("execution", "design", "newly_failed", "both_solved", "both_failed")
Item = dict[str, Any]


# -- readers -------------------------------------------------------------------------------
def read_jsonl(path: str | Path) -> list[dict]:
    """Read a JSONL file; a truncated last line (no newline, invalid JSON) is skipped."""
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    lines = text.split("\n")
    rows: list[dict] = []
    for i, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as e:
            if i == len(lines) and not text.endswith("\n"):
                warnings.warn(f"{path}:{i}: skipped a truncated last line", stacklevel=2)
                break
            raise ValueError(f"{path}:{i}: not valid JSON ({e.msg})") from None
    return rows


def read_metrics(run_dir: str | Path) -> list[dict]:
    """``RUN_DIR/metrics.jsonl`` sorted by step ([] when the run has none)."""
    path = Path(run_dir) / "metrics.jsonl"
    if not path.is_file():
        return []
    rows = read_jsonl(path)
    for i, row in enumerate(rows, start=1):
        if "step" not in row:
            raise ValueError(f"{path}: row {i} has no 'step' field")
    return sorted(rows, key=lambda r: r["step"])


def natural_key(text: str) -> list:
    """Sort key that orders ``step_9`` before ``step_10``."""
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", text)]


def find_eval_sets(path: str | Path) -> dict[str, Path]:
    """Label -> items.jsonl for a run folder (``eval/<label>/``), an eval folder
    (``<label>/items.jsonl``), one label folder, or an items.jsonl file; natural order."""
    path = Path(path)
    if path.is_file():
        return {path.parent.name: path}
    if (path / "items.jsonl").is_file():
        return {path.name: path / "items.jsonl"}
    base = path / "eval" if (path / "eval").is_dir() else path
    found = {p.parent.name: p for p in base.glob("*/items.jsonl")}
    return {k: found[k] for k in sorted(found, key=natural_key)}


def read_eval(path: str | Path) -> dict[str, list[Item]]:
    """Label -> eval items (see ``find_eval_sets`` for what ``path`` may be)."""
    return {label: read_jsonl(p) for label, p in find_eval_sets(path).items()}


def read_samples(run_dir: str | Path, last: int = 2) -> list[tuple[int, dict]]:
    """(step, episode) pairs from the newest ``last`` files of ``RUN_DIR/samples/``."""
    files = sorted(
        (Path(run_dir) / "samples").glob("step_*.jsonl"), key=lambda p: natural_key(p.name)
    )
    out: list[tuple[int, dict]] = []
    for path in files[-last:] if last > 0 else files:
        step = int(re.sub(r"\D", "", path.stem) or 0)
        out.extend((step, ep) for ep in read_jsonl(path))
    return out


def items_from_episodes(pairs: list[tuple[int, dict]]) -> list[Item]:
    """Training episodes -> one eval-shaped item per execution (so every analysis applies)."""
    items: list[Item] = []
    for step, ep in pairs:
        task, design = ep.get("task", {}), ep.get("design", {})
        for k, ex in enumerate(ep.get("executions", [])):
            calls = ex.get("calls", [])
            items.append(
                {
                    "benchmark": task.get("source") or "train",
                    "task_id": task.get("id", "?"),
                    "sample": k,
                    "mode": "designed",
                    "label": f"step_{step:06d}",
                    "step": step,
                    "structure": design.get("structure", ""),
                    "script": design.get("script", ""),
                    "answer": ex.get("answer"),
                    "reward": float(ex.get("reward", 0.0)),
                    "tokens_in": sum(len(c.get("prompt_ids", [])) for c in calls),
                    "tokens_out": sum(len(c.get("response_ids", [])) for c in calls),
                    "calls": len(calls),
                    "wall_s": ex.get("wall_s", 0.0),
                    "outcome": ex.get("outcome", ""),
                    "failure_reason": ex.get("reason"),
                    "exchanges": [
                        {
                            "agent": c.get("agent", "?"),
                            "role": c.get("role", "executor"),
                            "messages": c.get("messages", []),
                            "text": c.get("text", ""),
                        }
                        for c in calls
                    ],
                }
            )
    return items


# -- per-item facts --------------------------------------------------------------------------
def item_structure(item: Item) -> str:
    """Structure of one item: classified from its script; without a script (single-agent or
    template modes) the ``structure`` the harness recorded; else ``other``."""
    script = item.get("script") or ""
    if script.strip():
        return _classify(script)
    recorded = item.get("structure") or ""
    return recorded if recorded in STRUCTURES else "other"


@functools.lru_cache(maxsize=4096)
def _classify(script: str) -> str:
    return classify_structure(script)  # items of one design share a script: parse it once


def is_correct(item: Item) -> bool:
    """An item counts as solved when its reward is 1 (code: every test passed)."""
    if "reward" not in item:
        raise ValueError(f"eval item {item.get('task_id', '?')} has no 'reward' field")
    return float(item["reward"]) >= 1.0 - 1e-9


def _task_key(item: Item) -> tuple[str, str]:
    for name in ("benchmark", "task_id"):
        if name not in item:
            raise ValueError(f"eval item has no {name!r} field: {sorted(item)}")
    return str(item["benchmark"]), str(item["task_id"])


# -- analyses -----------------------------------------------------------------------------
def structure_distribution(items: list[Item]) -> dict[str, dict[str, int]]:
    """Benchmark -> structure -> number of items, structures in ``STRUCTURES`` order."""
    counts: dict[str, Counter] = defaultdict(Counter)
    for item in items:
        counts[str(item.get("benchmark", "?"))][item_structure(item)] += 1
    return {b: {s: c[s] for s in STRUCTURES if c[s]} for b, c in sorted(counts.items())}


@dataclass
class TaskResult:
    solved: bool  # at least half of the task's samples correct
    structure: str  # the most common structure among its samples (ties: alphabetical)
    accuracy: float  # fraction of its samples correct


def task_results(items: list[Item]) -> dict[tuple[str, str], TaskResult]:
    """(benchmark, task_id) -> TaskResult, pooling the task's samples."""
    groups: dict[tuple[str, str], list[Item]] = defaultdict(list)
    for item in items:
        groups[_task_key(item)].append(item)
    out = {}
    for key, group in groups.items():
        acc = sum(is_correct(i) for i in group) / len(group)
        structs = Counter(item_structure(i) for i in group)
        top = max(sorted(structs), key=lambda s: structs[s])
        out[key] = TaskResult(solved=acc >= 0.5, structure=top, accuracy=acc)
    return out


@dataclass
class Attribution:
    counts: dict[str, int]  # outcome -> number of tasks (every name in OUTCOMES)
    tasks: dict[str, list[tuple[str, str]]]  # outcome -> (benchmark, task_id) list
    unmatched: int = 0  # tasks present in only one of the two evaluations
    design_share: float | None = None  # design / (design + execution); None without gains
    structure_changes: dict[str, int] = field(default_factory=dict)  # "a -> b" -> tasks

    def by_benchmark(self) -> dict[str, dict[str, int]]:
        """Benchmark -> outcome -> tasks (every outcome present, zeros included)."""
        out: dict[str, dict[str, int]] = {}
        for outcome, keys in self.tasks.items():
            for bench, _ in keys:
                out.setdefault(bench, dict.fromkeys(OUTCOMES, 0))[outcome] += 1
        return dict(sorted(out.items()))


def attribution(before: list[Item], after: list[Item]) -> Attribution:
    """Split the change between two evaluations of the same tasks into design and execution."""
    b, a = task_results(before), task_results(after)
    tasks: dict[str, list[tuple[str, str]]] = {o: [] for o in OUTCOMES}
    changes: Counter = Counter()
    for key in sorted(set(b) & set(a)):
        old, new = b[key], a[key]
        if old.structure != new.structure:
            changes[f"{old.structure} -> {new.structure}"] += 1
        if new.solved and not old.solved:
            outcome = "execution" if old.structure == new.structure else "design"
        elif old.solved and not new.solved:
            outcome = "newly_failed"
        else:
            outcome = "both_solved" if new.solved else "both_failed"
        tasks[outcome].append(key)
    counts = {o: len(v) for o, v in tasks.items()}
    gains = counts["design"] + counts["execution"]
    return Attribution(
        counts=counts,
        tasks=tasks,
        unmatched=len(set(a) ^ set(b)),
        design_share=counts["design"] / gains if gains else None,
        structure_changes=dict(changes.most_common()),
    )


def _system_prompt(messages: list[dict]) -> str:
    for m in messages or []:
        if m.get("role") == "system":
            return str(m.get("content", ""))
    return ""


def diversity(items: list[Item]) -> dict[str, Any]:
    """Role names, system-prompt uniqueness within each system, and calls per execution.

    An agent is a distinct ``agent`` name among an item's executor exchanges (the designer's
    call is left out); its system prompt is the system message of its first exchange ("" when
    none). Calls per execution count executor exchanges (``calls`` when none are recorded)."""
    names: Counter = Counter()
    agents = unique = 0
    prompts: set[str] = set()
    calls: list[int] = []
    for item in items:
        ex = [e for e in item.get("exchanges") or [] if e.get("role", "executor") != "designer"]
        calls.append(len(ex) if "exchanges" in item else int(item.get("calls") or 0))
        system: dict[str, str] = {}
        for e in ex:
            system.setdefault(str(e.get("agent", "?")), _system_prompt(e.get("messages", [])))
        shared = Counter(system.values())
        agents += len(system)
        unique += sum(1 for p in system.values() if shared[p] == 1)
        prompts |= set(system.values())
        names.update(n.strip().lower() for n in system)
    return {
        "systems": len(items),
        "agents": agents,
        "agents_per_system": agents / len(items) if items else 0.0,
        "distinct_role_names": len(names),
        "top_role_names": names.most_common(10),
        "unique_prompt_fraction": unique / agents if agents else 0.0,
        "distinct_system_prompts": len(prompts),
        "calls_per_execution": sum(calls) / len(calls) if calls else 0.0,
    }


def cost_by_structure(items: list[Item]) -> dict[str, dict[str, float]]:
    """Structure -> items, tasks, accuracy, tokens per task (in + out) and calls per task."""
    groups: dict[str, list[Item]] = defaultdict(list)
    for item in items:
        groups[item_structure(item)].append(item)
    out = {}
    for s in [s for s in STRUCTURES if s in groups]:
        g = groups[s]
        tokens = [int(i.get("tokens_in") or 0) + int(i.get("tokens_out") or 0) for i in g]
        out[s] = {
            "items": len(g),
            "tasks": len({_task_key(i) for i in g}),
            "accuracy": sum(is_correct(i) for i in g) / len(g),
            "tokens_per_task": sum(tokens) / len(g),
            "calls_per_task": sum(int(i.get("calls") or 0) for i in g) / len(g),
        }
    return out


def accuracy_by_benchmark(items: list[Item]) -> dict[str, float]:
    """Benchmark -> pass@1 in [0, 1], averaged over samples."""
    groups: dict[str, list[bool]] = defaultdict(list)
    for item in items:
        groups[_task_key(item)[0]].append(is_correct(item))
    return {b: sum(v) / len(v) for b, v in sorted(groups.items())}


def paper_table(rows: dict[str, dict[str, float]], *, reference: bool = False) -> str:
    """Markdown accuracy table in the paper's layout: rows = method, columns = AIME24 ...
    CodeContests, then any other benchmark, then Avg. (over the row's filled columns; marked *
    when some paper column is missing). Values in [0, 1] are shown in %. ``reference`` appends
    the rows quoted from the paper."""
    extra = sorted({b for r in rows.values() for b in r} - set(PAPER_BENCHMARKS) - {"avg"})
    cols = list(PAPER_BENCHMARKS) + extra
    head = [PAPER_COLUMNS.get(c, c) for c in cols]
    lines = ["| Method | " + " | ".join(head) + " | Avg. |", "|---|" + "---:|" * (len(cols) + 1)]
    for method, accs in rows.items():
        vals = [accs.get(c) for c in cols]
        filled = [100 * v for v in vals if v is not None]
        avg = f"{sum(filled) / len(filled):.2f}" if filled else "–"
        if filled and any(accs.get(c) is None for c in PAPER_BENCHMARKS):
            avg += "*"
        cells = ["–" if v is None else f"{100 * v:.2f}" for v in vals]
        lines.append(f"| {method} | " + " | ".join(cells) + f" | {avg} |")
    if reference:
        for method, ref in PAPER_REFERENCE.items():
            lines.append(
                f"| {method} | " + " | ".join("–" for _ in cols) + f" | {ref['avg']:.2f} |"
            )
    lines.append("")
    lines.append("Pass@1 in %, averaged over samples. * Avg. over the filled columns only.")
    if reference:
        lines.append(
            "Quoted rows give only the paper's reported average; see the paper for its "
            "per-benchmark numbers."
        )
    return "\n".join(lines) + "\n"


def phase_spans(metrics: list[dict]) -> list[tuple[str, int, int]]:
    """Contiguous (phase, first step, last step) runs of ``metrics.jsonl``."""
    spans: list[tuple[str, int, int]] = []
    for row in metrics:
        phase, step = str(row.get("phase", "?")), int(row["step"])
        if spans and spans[-1][0] == phase:
            spans[-1] = (phase, spans[-1][1], step)
        else:
            spans.append((phase, step, step))
    return spans
