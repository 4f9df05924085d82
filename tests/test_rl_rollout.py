"""The M x N rollout tree: shapes, rewards, recorded failures, seeds, batching, fixed mode."""

from __future__ import annotations

import asyncio
import re

import pytest

from metaagentx.backends.scripted import ScriptedGenerator
from metaagentx.config import load_config
from metaagentx.rl.metrics import episode_metrics, failure_counts
from metaagentx.rl.rollout import fixed_structure, request_seed, rollout_step
from metaagentx.tasks.datasets import load_tasks
from metaagentx.types import Outcome

CAREFUL = """```python
solver = Agent("solver", "You are careful. End with \\\\boxed{answer}.")
submit(single(solver, QUESTION))
```"""
SLOPPY = """```python
solver = Agent("solver", "You are sloppy. End with \\\\boxed{answer}.")
submit(single(solver, QUESTION))
```"""
FORBIDDEN = """```python
import os
submit(os.getcwd())
```"""
SILENT = """```python
solver = Agent("solver", "You are careful.")
x = solver.ask(QUESTION)
if len(x) < 0:
    submit(x)
```"""


def is_designer(messages) -> bool:
    return isinstance(messages, list) and "design a small team" in messages[0]["content"]


def policy(designs: list[str]):
    """A deterministic scripted policy: the k-th designer call gets ``designs[k % len]``; an
    agent whose system prompt says "careful" answers a + b correctly, any other answers 0."""
    count = {"designer": 0}

    def reply(messages) -> str:
        if is_designer(messages):
            k = count["designer"]
            count["designer"] += 1
            return designs[k % len(designs)]
        system = messages[0]["content"] if messages[0]["role"] == "system" else ""
        a, op, b = re.search(r"(\d+) ([+*]) (\d+)", messages[-1]["content"]).groups()
        value = int(a) + int(b) if op == "+" else int(a) * int(b)
        return f"\\boxed{{{value if 'careful' in system else value + 1}}}"

    return reply


class SeedRecorder(ScriptedGenerator):
    """The scripted backend, also recording the seed of every request it serves."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.seeds: list[int | None] = []

    async def generate(self, prompt_ids, params):
        self.seeds.append(params.seed)
        return await super().generate(prompt_ids, params)


def cfg_for(**over):
    base = [
        "--rollout.m=2",
        "--rollout.n=2",
        "--rollout.tasks_per_step=2",
        "--mas.timeout_s=60",
        "--run.seed=3",
    ]
    return load_config(None, base + [f"--{k}={v}" for k, v in over.items()])


def test_request_seed_is_stable_and_distinct():
    assert request_seed(0, 1, 2, 3, 4) == request_seed(0, 1, 2, 3, 4)
    seeds = {
        request_seed(0, s, t, m, n)
        for s in range(3)
        for t in range(3)
        for m in range(3)
        for n in range(-1, 3)
    }
    assert len(seeds) == 3 * 3 * 3 * 4
    assert all(0 <= s < 2**31 for s in seeds)


def test_fixed_structure_parsing():
    assert fixed_structure("designed") is None
    assert fixed_structure("fixed:debate") == "debate"
    with pytest.raises(ValueError, match="rollout.mode: unknown structure 'chain'"):
        fixed_structure("fixed:chain")
    with pytest.raises(ValueError, match="rollout.mode must be"):
        fixed_structure("random")


def test_tree_rewards_outcomes_and_batching():
    tasks = load_tasks("generated:arith", limit=2, seed=0)
    gen = SeedRecorder(policy([CAREFUL, SLOPPY, FORBIDDEN, SILENT]))
    cfg = cfg_for()
    groups = asyncio.run(rollout_step(tasks, gen, cfg=cfg, step=5))
    assert [len(g) for g in groups] == [2, 2]
    assert all(len(ep.executions) == 2 for g in groups for ep in g)
    careful, sloppy = groups[0]
    forbidden, silent = groups[1]
    assert [ex.reward for ex in careful.executions] == [1.0, 1.0]
    assert [ex.outcome for ex in careful.executions] == [Outcome.SUBMITTED] * 2
    assert [ex.reward for ex in sloppy.executions] == [0.0, 0.0]
    assert forbidden.design.rejected is not None and forbidden.design.call is not None
    assert [ex.outcome for ex in forbidden.executions] == [Outcome.REJECTED] * 2
    assert all(not ex.calls and ex.reward == 0.0 for ex in forbidden.executions)
    assert [ex.outcome for ex in silent.executions] == [Outcome.NO_ANSWER] * 2
    # 4 designer calls + 2 runs x 1 call for careful, sloppy and silent designs
    assert gen.calls == 4 + 6
    assert gen.batches < gen.calls  # concurrent requests were served together
    fails = failure_counts(groups)
    assert fails == {f"rejected:{forbidden.design.rejected}": 2, "no_answer": 2}
    stats = episode_metrics(groups)
    assert stats["reward_mean"] == pytest.approx(2 / 8)
    assert stats["design_valid_frac"] == pytest.approx(3 / 4)
    assert stats["design_reward_mean"] == pytest.approx(1 / 3)
    expected = {request_seed(3, 5, t, m) for t in range(2) for m in range(2)}
    expected |= {request_seed(3, 5, t, m, n) for t, m in [(0, 0), (0, 1), (1, 1)] for n in range(2)}
    assert set(gen.seeds) == expected


def test_fixed_mode_uses_templates_and_no_designer():
    tasks = load_tasks("generated:arith", limit=1, seed=0)
    gen = ScriptedGenerator(policy([CAREFUL]))
    groups = asyncio.run(rollout_step(tasks, gen, cfg=cfg_for(**{"rollout.mode": "fixed:single"})))
    assert all(ep.design.call is None and ep.design.structure == "single" for ep in groups[0])
    assert not any(is_designer(p) for p in gen.prompts)
    assert all(ex.outcome == Outcome.SUBMITTED for ep in groups[0] for ex in ep.executions)


def test_separate_designer_generator_serves_designer_calls():
    tasks = load_tasks("generated:arith", limit=2, seed=0)
    executor = ScriptedGenerator(policy([CAREFUL]))
    designer = ScriptedGenerator(policy([CAREFUL]))
    groups = asyncio.run(rollout_step(tasks, executor, cfg=cfg_for(), designer_generator=designer))
    assert designer.calls == 4 and all(is_designer(p) for p in designer.prompts)
    assert executor.calls == 8 and not any(is_designer(p) for p in executor.prompts)
    assert all(ex.reward == 1.0 for g in groups for ep in g for ex in ep.executions)


def test_timeouts_are_recorded_outcomes_with_zero_reward():
    looping = """```python
while True:
    pass
submit("1")
```"""
    tasks = load_tasks("generated:arith", limit=1, seed=0)
    gen = ScriptedGenerator(policy([looping]))
    cfg = cfg_for(**{"rollout.m": 1, "rollout.n": 2, "mas.timeout_s": 3})
    groups = asyncio.run(rollout_step(tasks, gen, cfg=cfg))
    runs = groups[0][0].executions
    assert [ex.outcome for ex in runs] == [Outcome.TIMEOUT] * 2
    assert [ex.reward for ex in runs] == [0.0, 0.0]
    assert failure_counts(groups) == {"timeout": 2}
