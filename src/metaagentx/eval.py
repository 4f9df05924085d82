"""Benchmark evaluation: run each task with a single agent, a fixed MAS template, or a MAS the
policy designs; score it; write one JSON line per (benchmark, task, sample).

    metaagentx eval --benchmarks aime24,aime25 --mode designed --samples 4 --out runs/x
    metaagentx eval --table runs/x/eval/*          # several labels side by side

Items run concurrently (an ``asyncio`` semaphore bounds them) so that their LLM calls reach the
backend together and are batched. Each finished item is appended to
``<out>/eval/<label>/items.jsonl`` at once; a rerun skips the items already there (key =
benchmark, task_id, sample) and tolerates a truncated last line, so an interrupted eval resumes.
Tables are built by :mod:`metaagentx.eval_tables`.
"""

from __future__ import annotations

import asyncio
import json
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from metaagentx.backends.base import Generator, SamplingParams
from metaagentx.config import Config
from metaagentx.types import Call, Design, Execution, Outcome, Task

ItemKey = tuple[str, str, int]


class EvalError(ValueError):
    """Bad eval request: unknown mode, items of another run in the same folder."""


@dataclass(frozen=True)
class EvalMode:
    """How a task is run: ``single``, ``fixed:<structure>`` or ``designed``."""

    kind: str  # "fixed" (single is fixed:single) | "designed"
    structure: str = ""  # template name for kind == "fixed"

    @property
    def name(self) -> str:
        return "designed" if self.kind == "designed" else f"fixed:{self.structure}"


def parse_mode(mode: str) -> EvalMode:
    """``single`` | ``fixed:<structure>`` | ``designed`` -> EvalMode (error names the choices)."""
    from metaagentx.mas.templates import TEMPLATES

    if mode == "designed":
        return EvalMode("designed")
    structure = "single" if mode == "single" else mode.split(":", 1)[1] if ":" in mode else ""
    if not mode.startswith(("fixed:", "single")) or structure not in TEMPLATES:
        choices = ["single", "designed"] + [f"fixed:{t}" for t in TEMPLATES]
        raise EvalError(f"--mode {mode!r} is not one of {choices}")
    return EvalMode("fixed", structure)


def item_key(row: dict[str, Any]) -> ItemKey:
    return (str(row["benchmark"]), str(row["task_id"]), int(row["sample"]))


def read_items(path: Path, *, repair: bool = False) -> list[dict[str, Any]]:
    """Finished items of ``path``. A last line cut off mid-write is dropped (and, with
    ``repair``, removed from the file so that appends start on a clean line); a bad line
    anywhere else is an error naming the file and line."""
    if not path.is_file():
        return []
    lines = path.read_text().splitlines(keepends=True)
    rows: list[dict[str, Any]] = []
    for i, line in enumerate(lines):
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as e:
            if i < len(lines) - 1:
                raise EvalError(f"{path}:{i + 1}: not valid JSON ({e})") from e
            if repair:
                path.write_text("".join(lines[:-1]))
            break
    else:
        if repair and lines and not lines[-1].endswith("\n"):
            path.write_text("".join(lines) + "\n")
    return rows


async def _score(task: Task, answer: str, cfg: Config) -> dict[str, Any]:
    """{reward, pass_fraction, reason} of ``answer`` for ``task`` (off the event loop)."""
    from metaagentx import tasks as task_rewards

    return await task_rewards.reward_details_async(task, answer, timeout_s=cfg.data.code_timeout_s)


def _exchanges(calls: list[Call]) -> list[dict[str, Any]]:
    return [
        {"agent": c.agent, "role": c.role, "messages": c.messages, "text": c.text} for c in calls
    ]


def item_seed(run_seed: int, benchmark: str, task_id: str, sample: int) -> int:
    """A stable per-item sampling seed: reruns and resumed runs draw the same samples."""
    return zlib.crc32(f"{run_seed}|{benchmark}|{task_id}|{sample}".encode()) % (2**31)


async def _design(
    task: Task, mode: EvalMode, gen: Generator, cfg: Config, temperature: float, seed: int
) -> Design:
    """The template (fixed modes) or one design by ``gen`` (designed mode)."""
    from metaagentx.mas import runtime
    from metaagentx.mas.templates import template_script

    if mode.kind == "fixed":
        return Design(script=template_script(mode.structure, task), structure=mode.structure)
    sampling = SamplingParams(
        temperature=temperature,
        top_p=cfg.generation.top_p,
        max_new_tokens=cfg.generation.designer_max_tokens,
        seed=seed,
    )
    return await runtime.design(task, gen, sampling=sampling)


async def run_item(
    task: Task,
    benchmark: str,
    sample: int,
    mode: EvalMode,
    gen: Generator,
    cfg: Config,
    *,
    label: str,
    temperature: float,
    designer: Generator | None = None,
) -> dict[str, Any]:
    """Run one task once (design if asked, then execute), score it, return its JSON row.
    ``designer`` designs (default ``gen``); ``gen`` plays every agent."""
    from metaagentx.mas import runtime

    t0 = time.perf_counter()
    seed = item_seed(cfg.run.seed, benchmark, task.id, sample)
    design = await _design(task, mode, designer or gen, cfg, temperature, seed)
    if design.rejected or not design.script:
        execution = Execution(outcome=Outcome.REJECTED, reason=design.rejected or "no_script")
    else:
        sampling = SamplingParams(
            temperature=temperature,
            top_p=cfg.generation.top_p,
            max_new_tokens=cfg.generation.executor_max_tokens,
            seed=seed + 1,
        )
        execution = await runtime.execute(design.script, task, gen, mas=cfg.mas, sampling=sampling)
    answer = execution.answer if execution.outcome == Outcome.SUBMITTED else None
    score = await _score(task, answer, cfg) if answer is not None else {}
    reward = float(score.get("reward", 0.0))
    calls = ([design.call] if design.call is not None else []) + list(execution.calls)
    executor_calls = [c for c in execution.calls if c.role == "executor"]
    failed = execution.outcome != Outcome.SUBMITTED
    return {
        "benchmark": benchmark,
        "task_id": task.id,
        "sample": sample,
        "mode": mode.name,
        "label": label,
        "structure": design.structure,
        "script": design.script,
        "answer": answer,
        "reward": reward,
        "pass_fraction": float(score.get("pass_fraction", reward)),
        "reward_reason": score.get("reason"),
        "tokens_in": sum(len(c.prompt_ids) for c in calls),
        "tokens_out": sum(len(c.response_ids) for c in calls),
        "calls": len(calls),
        "wall_s": round(time.perf_counter() - t0, 3),
        "outcome": execution.outcome.value,
        "failure_reason": (execution.reason or execution.outcome.value) if failed else None,
        "response": executor_calls[-1].text if executor_calls else "",
        "exchanges": _exchanges(calls),
    }


class _Progress:
    """A rich progress bar whose description shows the running accuracy."""

    def __init__(self, total: int, done: int, correct: float, label: str, enabled: bool):
        self.n, self.correct, self.label = done, correct, label
        self.bar = None
        if enabled:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
            )

            self.bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
            )
            self.task = self.bar.add_task(self._desc(), total=total, completed=done)
            self.bar.start()

    def _desc(self) -> str:
        acc = 100.0 * self.correct / self.n if self.n else 0.0
        return f"eval {self.label}  acc {acc:5.1f}%"

    def update(self, reward: float) -> None:
        self.n += 1
        self.correct += reward
        if self.bar is not None:
            self.bar.update(self.task, advance=1, description=self._desc())

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


async def evaluate(
    tasks: dict[str, list[Task]],
    gen: Generator,
    cfg: Config,
    *,
    mode: str,
    items_path: Path,
    label: str,
    samples: int = 1,
    temperature: float | None = None,
    progress: bool = True,
    on_item: Callable[[dict[str, Any]], None] | None = None,
    designer: Generator | None = None,
) -> list[dict[str, Any]]:
    """Evaluate every (benchmark, task, sample) not yet in ``items_path``; return all rows.

    ``tasks`` maps a benchmark name to its tasks. Rows are appended as they finish. Items of
    another mode or label already in the file are an error (use another label). ``designer``
    (designed mode) writes the scripts when it is not ``gen`` (a frozen executor baseline)."""
    m = parse_mode(mode)
    items_path.parent.mkdir(parents=True, exist_ok=True)
    rows = read_items(items_path, repair=True)
    for r in rows:
        if r.get("mode") != m.name or r.get("label") != label:
            raise EvalError(
                f"{items_path} holds items of mode={r.get('mode')!r} "
                f"label={r.get('label')!r}; this run is mode={m.name!r} "
                f"label={label!r}: choose another --label or --out"
            )
    done = {item_key(r) for r in rows}
    todo = [
        (b, t, s)
        for b, ts in tasks.items()
        for t in ts
        for s in range(samples)
        if (b, t.id, s) not in done
    ]
    temp = cfg.generation.temperature if temperature is None else temperature
    bar = _Progress(
        len(todo) + len(done), len(done), sum(r["reward"] for r in rows), label, progress
    )
    sem = asyncio.Semaphore(max(1, cfg.mas.concurrency))
    new: list[dict[str, Any]] = []
    with items_path.open("a") as f:

        async def one(bench: str, task: Task, sample: int) -> None:
            async with sem:
                row = await run_item(
                    task,
                    bench,
                    sample,
                    m,
                    gen,
                    cfg,
                    label=label,
                    temperature=temp,
                    designer=designer,
                )
            f.write(json.dumps(row) + "\n")
            f.flush()
            new.append(row)
            bar.update(row["reward"])
            if on_item is not None:
                on_item(row)

        try:
            await asyncio.gather(*(one(b, t, s) for b, t, s in todo))
        finally:
            bar.close()
    return rows + new


def load_benchmarks(specs: list[str], *, limit: int = 0, seed: int = 0) -> dict[str, list[Task]]:
    """Benchmark specs (names, paths, ``generated:<kind>``) -> {spec: tasks}."""
    from metaagentx.tasks.datasets import load_tasks

    return {s: load_tasks(s, limit=limit, seed=seed) for s in specs}


def validity_rate(rows: list[dict[str, Any]]) -> float:
    """Fraction of designs that passed the script check and submitted an answer."""
    return sum(r["outcome"] == Outcome.SUBMITTED.value for r in rows) / max(1, len(rows))


def accuracy(rows: list[dict[str, Any]]) -> float:
    """Mean reward (pass@1 averaged over samples) as a fraction."""
    return sum(float(r["reward"]) for r in rows) / max(1, len(rows))


def eval_dir(out_dir: str | Path, label: str) -> Path:
    return Path(out_dir) / "eval" / label


def run_eval(
    cfg: Config,
    gen: Generator,
    *,
    benchmarks: list[str],
    mode: str,
    out_dir: str | Path,
    label: str,
    samples: int = 1,
    limit: int = 0,
    temperature: float | None = None,
    progress: bool = True,
    designer: Generator | None = None,
) -> list[dict[str, Any]]:
    """Load the benchmarks, evaluate (resuming), write ``items.jsonl`` and ``table.md`` under
    ``<out_dir>/eval/<label>/``; return all rows."""
    from metaagentx.eval_tables import render_report

    tasks = load_benchmarks(benchmarks, limit=limit, seed=cfg.data.seed)
    folder = eval_dir(out_dir, label)
    rows = asyncio.run(
        evaluate(
            tasks,
            gen,
            cfg,
            mode=mode,
            items_path=folder / "items.jsonl",
            label=label,
            samples=samples,
            temperature=temperature,
            progress=progress,
            designer=designer,
        )
    )
    (folder / "table.md").write_text(render_report({label: rows}))
    return rows
