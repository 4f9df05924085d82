"""Cold-start demonstrations: designer (task -> MAS script) and executor (agent call) examples,
kept only from executions whose answer is correct.

    metaagentx sft-data --config configs/cpu-demo.toml                    # templates + policy
    metaagentx sft-data --config C --teacher Qwen/Qwen3-32B --generation.backend=openai

Two modes:

* **teacher** (``sft.teacher`` set): for each training task the teacher writes MAS scripts with
  the designer prompt, each request seeded with one of our templates (rotating, so every
  structure appears); valid scripts are executed with the teacher as executor.
* **templates** (no teacher): the designer side is our templates instantiated for the task
  (task-appropriate role prompts come from ``template_script``); the executor side is filled by
  rejection sampling from the policy itself, which plays every agent.

Either way an execution enters the data only when its reward is 1.0. A teacher's design enters
only when at least one of its executions did; a template design (correct by construction, and
not the policy's own work) enters whenever it fits in ``generation.designer_max_tokens``, with
``provenance.verified`` telling whether one of its executions was correct. Designer examples
always carry the plain designer prompt (without the seeding hint), the prompt the policy sees
in RL. Executor calls cut at ``max_new_tokens`` are kept (from correct executions only) with
``finish = "length"``: SFT then trains on their text without an end-of-turn token. Output under ``DIR``:
``designer.jsonl``, ``executor.jsonl`` (``{"messages": [...], "provenance": {...}}`` per line)
and ``stats.json`` (sizes, structure mix, acceptance rate).
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from metaagentx.backends.base import Generator, SamplingParams
from metaagentx.config import Config
from metaagentx.types import Call, Execution, Outcome, Task

SEED_STRUCTURES = ("single", "reflection", "ensemble", "solver_tester", "debate")


@dataclass
class DemoStats:
    """Counts behind the acceptance rate and the structure mix."""

    mode: str
    teacher: str
    tasks: int = 0
    designs: int = 0
    designs_valid: int = 0
    designs_kept: int = 0
    executions: int = 0
    executions_correct: int = 0
    executor_calls_kept: int = 0
    calls_truncated: int = 0
    rejections: Counter = field(default_factory=Counter)
    structure_mix: Counter = field(default_factory=Counter)
    tasks_covered: set = field(default_factory=set)

    def as_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "teacher": self.teacher,
            "tasks": self.tasks,
            "tasks_with_demo": len(self.tasks_covered),
            "designs": self.designs,
            "designs_valid": self.designs_valid,
            "designer_examples": self.designs_kept,
            "executions": self.executions,
            "executions_correct": self.executions_correct,
            "acceptance_rate": self.executions_correct / max(1, self.executions),
            "executor_examples": self.executor_calls_kept,
            "executor_examples_truncated": self.calls_truncated,
            "rejections": dict(self.rejections),
            "structure_mix": dict(self.structure_mix),
        }


def fenced(script: str) -> str:
    """The designer's answer format for a script: one fenced Python block."""
    return f"```python\n{script.strip()}\n```"


def seeded_messages(task: Task, structure: str) -> list[dict[str, str]]:
    """The designer prompt plus a hint naming ``structure`` and showing its template."""
    from metaagentx.mas.runtime import designer_messages
    from metaagentx.mas.templates import template_script

    messages = [dict(m) for m in designer_messages(task)]
    hint = (
        f"\n\nUse the `{structure}` structure; adapt the agents' role prompts to this task. "
        f"A starting point:\n{fenced(template_script(structure, task))}"
    )
    messages[-1]["content"] += hint
    return messages


def _structure_of(script: str, default: str) -> str:
    try:
        from metaagentx.mas.structure import classify_structure
    except ImportError:
        return default
    return classify_structure(script)


def _too_long(gen: Generator, script: str, max_tokens: int) -> bool:
    tokenizer = getattr(gen, "tokenizer", None)
    if tokenizer is None:
        return False
    return len(tokenizer.encode(fenced(script), add_special_tokens=False)) + 1 > max_tokens


def _executor_examples(calls: list[Call], prov: dict[str, Any], stats: DemoStats) -> list[dict]:
    out = []
    for c in calls:
        if c.role != "executor":
            continue
        if c.finish_reason == "error":
            continue
        stats.calls_truncated += c.finish_reason == "length"
        msgs = [dict(m) for m in c.messages] + [{"role": "assistant", "content": c.text}]
        out.append(
            {"messages": msgs, "finish": c.finish_reason, "provenance": {**prov, "agent": c.agent}}
        )
    stats.executor_calls_kept += len(out)
    return out


async def _teacher_script(
    task: Task, structure: str, gen: Generator, cfg: Config
) -> tuple[str, str | None]:
    """One teacher designer call seeded with ``structure`` -> (script, rejection reason)."""
    from metaagentx.mas.script import check_script, extract_script

    params = SamplingParams(
        temperature=cfg.generation.temperature,
        top_p=cfg.generation.top_p,
        max_new_tokens=cfg.generation.designer_max_tokens,
    )
    res = await gen.generate(gen.render(seeded_messages(task, structure)), params)
    script = extract_script(res.text)
    if script is None:
        return "", "no_script"
    return script, check_script(script)


async def _one_design(
    task: Task,
    structure: str,
    gen: Generator,
    cfg: Config,
    stats: DemoStats,
    teacher: str,
    executions: int,
) -> tuple[list[dict], list[dict]]:
    """Design (teacher or template), execute ``executions`` times, keep the correct ones."""
    from metaagentx import tasks as rewards
    from metaagentx.mas import runtime
    from metaagentx.mas.templates import template_script

    if teacher:
        script, rejected = await _teacher_script(task, structure, gen, cfg)
        structure = _structure_of(script, structure) if script else structure
    else:
        script, rejected = template_script(structure, task), None
    if not rejected and _too_long(gen, script, cfg.generation.designer_max_tokens):
        rejected = "longer_than_designer_max_tokens"  # the policy could never write it whole
    stats.designs += 1
    if rejected:
        stats.rejections[rejected] += 1
        return [], []
    stats.designs_valid += 1
    params = SamplingParams(
        temperature=cfg.generation.temperature,
        top_p=cfg.generation.top_p,
        max_new_tokens=cfg.generation.executor_max_tokens,
    )
    runs: list[Execution] = await asyncio.gather(
        *(
            runtime.execute(script, task, gen, mas=cfg.mas, sampling=params)
            for _ in range(executions)
        )
    )
    prov = {"teacher": teacher or "policy", "structure": structure, "task_id": task.id}
    executor: list[dict] = []
    correct = 0
    for ex in runs:
        stats.executions += 1
        ok = ex.outcome == Outcome.SUBMITTED and ex.answer is not None
        reward = 0.0
        if ok:
            details = await rewards.reward_details_async(
                task, ex.answer, timeout_s=cfg.data.code_timeout_s
            )
            reward = float(details["reward"])
        if reward != 1.0:  # an incorrect execution never enters the data
            continue
        correct += 1
        executor += _executor_examples(ex.calls, {**prov, "reward": reward}, stats)
    stats.executions_correct += correct
    if teacher and not correct:  # a teacher's design must prove itself
        return [], []
    stats.designs_kept += 1
    stats.structure_mix[structure] += 1
    stats.tasks_covered.add(task.id)
    msgs = [dict(m) for m in runtime.designer_messages(task)]
    msgs.append({"role": "assistant", "content": fenced(script)})
    prov = {**prov, "reward": correct / max(1, len(runs)), "verified": correct > 0}
    return [{"messages": msgs, "provenance": prov}], executor


def task_structures(
    index: int, count: int, structures: tuple[str, ...] = SEED_STRUCTURES
) -> list[str]:
    """The ``count`` seed structures tried for task number ``index`` (rotating, so that every
    structure appears across tasks even when ``count`` is smaller than their number)."""
    n = len(structures)
    return [structures[(index + j) % n] for j in range(count)]


async def generate_demonstrations(
    tasks: list[Task],
    gen: Generator,
    cfg: Config,
    *,
    teacher: str = "",
    samples_per_task: int | None = None,
    executions: int = 1,
    progress: bool = True,
    structures: tuple[str, ...] = SEED_STRUCTURES,
) -> tuple[list[dict], list[dict], DemoStats]:
    """(designer examples, executor examples, stats) for ``tasks``; all designs run
    concurrently (bounded by ``mas.concurrency``) so their calls are batched."""
    k = cfg.sft.samples_per_task if samples_per_task is None else samples_per_task
    stats = DemoStats(
        mode="teacher" if teacher else "templates", teacher=teacher or "policy", tasks=len(tasks)
    )
    sem = asyncio.Semaphore(max(1, cfg.mas.concurrency))
    jobs = [(t, s) for i, t in enumerate(tasks) for s in task_structures(i, k, structures)]
    bar = _bar(len(jobs), progress)

    async def one(task: Task, structure: str) -> tuple[list[dict], list[dict]]:
        async with sem:
            out = await _one_design(task, structure, gen, cfg, stats, teacher, executions)
        if bar is not None:
            bar[0].update(bar[1], advance=1, description=_desc(stats))
        return out

    try:
        results = await asyncio.gather(*(one(t, s) for t, s in jobs))
    finally:
        if bar is not None:
            bar[0].stop()
    designer = [d for ds, _ in results for d in ds]
    executor = [e for _, es in results for e in es]
    return designer, executor, stats


def _desc(stats: DemoStats) -> str:
    rate = 100.0 * stats.executions_correct / max(1, stats.executions)
    return f"demos  accepted {stats.executions_correct}/{stats.executions} ({rate:.0f}%)"


def _bar(total: int, enabled: bool) -> Any:
    if not enabled:
        return None
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn())
    task_id = bar.add_task("demos", total=total)
    bar.start()
    return bar, task_id


def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")


def write_demonstrations(
    out_dir: str | Path, designer: list[dict], executor: list[dict], stats: DemoStats
) -> dict[str, Any]:
    """Write designer.jsonl, executor.jsonl and stats.json into ``out_dir``; return stats."""
    out = Path(out_dir)
    write_jsonl(out / "designer.jsonl", designer)
    write_jsonl(out / "executor.jsonl", executor)
    info = stats.as_dict()
    (out / "stats.json").write_text(json.dumps(info, indent=2) + "\n")
    return info


def format_stats(info: dict[str, Any]) -> str:
    """A few lines for the terminal: sizes, acceptance rate, structure mix."""
    mix = ", ".join(f"{k} {v}" for k, v in sorted(info["structure_mix"].items())) or "none"
    return (
        f"demonstrations ({info['mode']}, teacher={info['teacher']}): "
        f"{info['designer_examples']} designer, {info['executor_examples']} executor examples\n"
        f"acceptance: {info['executions_correct']}/{info['executions']} executions correct "
        f"({100 * info['acceptance_rate']:.1f}%), {info['designs_valid']}/{info['designs']} "
        f"designs valid, {info['tasks_with_demo']}/{info['tasks']} tasks covered\n"
        f"structure mix: {mix}"
    )


def build_demonstrations(
    cfg: Config,
    out_dir: str | Path,
    *,
    gen: Generator | None = None,
    teacher: str | None = None,
    executions: int = 1,
    progress: bool = True,
) -> dict[str, Any]:
    """Load the training tasks (``data.train``, ``sft.tasks`` of them), generate, filter and
    write the demonstrations; return the stats. Without ``gen``, the teacher (``teacher`` or
    ``sft.teacher``) or else the policy (``model.name``) is loaded via ``generation.backend``."""
    from metaagentx.tasks.datasets import load_tasks

    teacher = cfg.sft.teacher if teacher is None else teacher
    if gen is None:
        from metaagentx.backends import load_generator

        run_cfg = cfg if not teacher else replace(cfg, model=replace(cfg.model, name=teacher))
        gen = load_generator(run_cfg)
    tasks = load_tasks(cfg.data.train, limit=cfg.sft.tasks, seed=cfg.data.seed)
    designer, executor, stats = asyncio.run(
        generate_demonstrations(
            tasks, gen, cfg, teacher=teacher, executions=executions, progress=progress
        )
    )
    return write_demonstrations(out_dir, designer, executor, stats)
