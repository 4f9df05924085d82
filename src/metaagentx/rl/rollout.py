"""The rollout tree of one training step: per task, M designs, each executed N times.

    groups = asyncio.run(rollout_step(tasks, generator, cfg=cfg, step=7))
    groups[t][m].executions[n].reward     # the M x N reward matrix of task t

Everything in a step runs concurrently: the M designer calls of every task are in flight
together, and each design's N executions start as soon as its script exists (at most
``mas.concurrency`` executions at once), so the backend batches the LLM calls of all of them.
Every request carries a seed derived from (run seed, step, task, design, execution), so a
step's rollouts are reproducible and a resumed run samples what an uninterrupted one would.

A design whose script fails the static check never runs: its N executions are recorded with
outcome ``rejected`` and reward 0. Executions that time out, crash or never submit keep the
outcome the runtime recorded and get reward 0. ``rollout.mode = "fixed:<structure>"`` replaces
the designer by a template (``Design.call`` is None, so the designer has nothing to train).
"""

from __future__ import annotations

import asyncio
import hashlib

from metaagentx.backends.base import Generator, SamplingParams
from metaagentx.config import Config
from metaagentx.types import Design, Episode, Execution, Outcome, Task


def request_seed(run_seed: int, step: int, task: int, design: int, execution: int = -1) -> int:
    """A 31-bit sampling seed for one request; ``execution=-1`` is the designer call."""
    key = f"{run_seed}/{step}/{task}/{design}/{execution}".encode()
    return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "little") & 0x7FFFFFFF


def fixed_structure(mode: str) -> str | None:
    """``"fixed:debate"`` -> ``"debate"``; ``"designed"`` -> None; anything else is an error."""
    if mode == "designed":
        return None
    if mode.startswith("fixed:"):
        from metaagentx.mas.templates import TEMPLATES

        name = mode.split(":", 1)[1]
        if name not in TEMPLATES:
            raise ValueError(
                f"rollout.mode: unknown structure {name!r}; choose one of {', '.join(TEMPLATES)}"
            )
        return name
    raise ValueError(f"rollout.mode must be 'designed' or 'fixed:<structure>', got {mode!r}")


def _sampling(cfg: Config, max_tokens: int, seed: int) -> SamplingParams:
    g = cfg.generation
    return SamplingParams(
        temperature=g.temperature, top_p=g.top_p, max_new_tokens=max_tokens, seed=seed
    )


async def _make_design(
    task: Task, t: int, m: int, generator: Generator, cfg: Config, step: int, structure: str | None
) -> Design:
    from metaagentx.mas import runtime

    if structure is not None:
        from metaagentx.mas.script import check_script
        from metaagentx.mas.templates import template_script

        script = template_script(structure, task)
        return Design(script=script, structure=structure, call=None, rejected=check_script(script))
    seed = request_seed(cfg.run.seed, step, t, m)
    return await runtime.design(
        task, generator, sampling=_sampling(cfg, cfg.generation.designer_max_tokens, seed)
    )


async def _score(task: Task, execution: Execution, cfg: Config) -> Execution:
    """Fill ``execution.reward``: the task's reward for a submitted answer, else 0."""
    from metaagentx.tasks import reward_details_async

    if execution.outcome == Outcome.SUBMITTED and execution.answer is not None:
        details = await reward_details_async(
            task, execution.answer, timeout_s=cfg.data.code_timeout_s
        )
        execution.reward = float(details["reward"])
    else:
        execution.reward = 0.0
    return execution


async def _episode(
    task: Task,
    t: int,
    m: int,
    generator: Generator,
    designer: Generator,
    cfg: Config,
    step: int,
    structure: str | None,
    limit: asyncio.Semaphore,
) -> Episode:
    from metaagentx.mas import runtime

    design = await _make_design(task, t, m, designer, cfg, step, structure)
    if design.rejected is not None:
        runs = [
            Execution(outcome=Outcome.REJECTED, reason=design.rejected)
            for _ in range(cfg.rollout.n)
        ]
        return Episode(task=task, design=design, executions=runs)

    async def one(n: int) -> Execution:
        seed = request_seed(cfg.run.seed, step, t, m, n)
        async with limit:
            ex = await runtime.execute(
                design.script,
                task,
                generator,
                mas=cfg.mas,
                sampling=_sampling(cfg, cfg.generation.executor_max_tokens, seed),
                agent_sampling=False,  # one temperature, so recorded logprobs match training
            )
        return await _score(task, ex, cfg)

    runs = list(await asyncio.gather(*(one(n) for n in range(cfg.rollout.n))))
    return Episode(task=task, design=design, executions=runs)


async def rollout_step(
    tasks: list[Task],
    generator: Generator,
    *,
    cfg: Config,
    designer_generator: Generator | None = None,
    step: int = 0,
) -> list[list[Episode]]:
    """Roll out the M x N tree for every task; returns ``groups[task][design]`` episodes.

    ``designer_generator`` serves the designer calls in separate-policy mode (default: the
    same generator). ``step`` enters every request's seed.
    """
    if cfg.rollout.m < 1 or cfg.rollout.n < 1:
        raise ValueError(
            f"rollout.m and rollout.n must be >= 1, got {cfg.rollout.m}, {cfg.rollout.n}"
        )
    structure = fixed_structure(cfg.rollout.mode)
    designer = designer_generator if designer_generator is not None else generator
    limit = asyncio.Semaphore(max(1, cfg.mas.concurrency))
    jobs = [
        [
            _episode(task, t, m, generator, designer, cfg, step, structure, limit)
            for m in range(cfg.rollout.m)
        ]
        for t, task in enumerate(tasks)
    ]
    flat = await asyncio.gather(*(job for row in jobs for job in row))
    m = cfg.rollout.m
    return [list(flat[i * m : (i + 1) * m]) for i in range(len(tasks))]
