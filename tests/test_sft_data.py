"""Demonstrations are filtered by correctness: a scripted backend answers some tasks right and
some wrong, and no call of a wrong execution (nor its design) ever enters the data."""

from __future__ import annotations

import asyncio
import json
import re

from metaagentx.backends.scripted import ScriptedGenerator
from metaagentx.config import load_config
from metaagentx.tasks.datasets import load_tasks


def _sum(messages) -> int:
    text = next(m["content"] for m in messages if m["role"] == "user")
    a, b = map(int, re.search(r"What is (\d) \+ (\d)\?", text).groups())
    return a + b


def agent_reply(messages) -> str:
    """Right when a + b is even, wrong otherwise; critics approve."""
    if "reviewer" in messages[0]["content"]:
        return "CORRECT"
    s = _sum(messages)
    return f"The answer is \\boxed{{{s if s % 2 == 0 else s + 1}}}."


def _cfg(*extra: str):
    return load_config(
        None,
        [
            "--mas.timeout_s=60",
            "--mas.concurrency=16",
            "--generation.designer_max_tokens=2048",
            *extra,
        ],
    )


def test_only_correct_executions_enter_the_data(tmp_path):
    from metaagentx.sft_data import generate_demonstrations, write_demonstrations

    tasks = load_tasks("generated:arith", limit=8)
    even = {t.id for t in tasks if int(t.answer) % 2 == 0}
    assert 0 < len(even) < len(tasks)
    gen = ScriptedGenerator(agent_reply)
    designer, executor, stats = asyncio.run(
        generate_demonstrations(
            tasks,
            gen,
            _cfg(),
            samples_per_task=2,
            executions=2,
            progress=False,
            structures=("single", "reflection"),
        )
    )
    # Every task tries both structures, twice each: 8 tasks x 2 designs x 2 executions.
    assert stats.designs == 16 and stats.executions == 32
    assert stats.executions_correct == 4 * len(even)
    # Template designs are all demonstrated; they are marked verified when a run was correct.
    assert len(designer) == 16
    assert {d["provenance"]["task_id"] for d in designer if d["provenance"]["verified"]} == even
    assert {e["provenance"]["task_id"] for e in executor} == even
    # single: 1 call per run; reflection: solver + critic per run; 2 correct runs each.
    assert len(executor) == len(even) * (2 * 1 + 2 * 2)
    for ex in executor:
        msgs = ex["messages"]
        assert msgs[-1]["role"] == "assistant" and ex["provenance"]["reward"] == 1.0
        if ex["provenance"]["agent"] == "solver":
            assert msgs[-1]["content"] == f"The answer is \\boxed{{{_sum(msgs)}}}."
    for d in designer:
        assert d["messages"][-1]["content"].startswith("```python\n")
        assert (
            d["messages"][0]["role"] == "system"
            and "Design a team" in d["messages"][1]["content"]
            and "structure; adapt" not in d["messages"][1]["content"]
        )
    info = write_demonstrations(tmp_path, designer, executor, stats)
    assert info["acceptance_rate"] == 4 * len(even) / 32
    assert info["structure_mix"] == {"single": 8, "reflection": 8}
    assert len((tmp_path / "executor.jsonl").read_text().splitlines()) == len(executor)
    assert json.loads((tmp_path / "stats.json").read_text())["designer_examples"] == 16


def test_designer_examples_round_trip_through_the_script_check():
    from metaagentx.mas.script import check_script, extract_script
    from metaagentx.mas.templates import template_script
    from metaagentx.sft_data import SEED_STRUCTURES, fenced

    task = load_tasks("generated:arith", limit=1)[0]
    for structure in SEED_STRUCTURES:
        script = template_script(structure, task)
        assert extract_script(fenced(script)).strip() == script.strip()
        assert check_script(extract_script(fenced(script))) is None


def test_teacher_mode_keeps_only_correct_teacher_designs(tmp_path):
    """A teacher that designs a valid script for even tasks and an invalid one for odd tasks,
    and answers every task correctly: only the valid designs' runs are kept."""
    from metaagentx.sft_data import generate_demonstrations

    good = "```python\nsolver = Agent('solver', 'Solve.')\nsubmit(single(solver, QUESTION))\n```"

    def teacher(messages) -> str:
        if messages[-1]["content"].startswith("Design a team"):
            return good if _sum(messages[-1:]) % 2 == 0 else "```python\nimport os\n```"
        return f"\\boxed{{{_sum(messages)}}}"

    tasks = load_tasks("generated:arith", limit=6)
    even = {t.id for t in tasks if int(t.answer) % 2 == 0}
    designer, executor, stats = asyncio.run(
        generate_demonstrations(
            tasks,
            ScriptedGenerator(teacher),
            _cfg(),
            teacher="big-teacher",
            samples_per_task=1,
            progress=False,
        )
    )
    assert {d["provenance"]["task_id"] for d in designer} == even
    assert all(d["provenance"]["teacher"] == "big-teacher" for d in designer + executor)
    assert all(d["provenance"]["structure"] == "single" for d in designer)
    assert stats.designs == 6 and stats.designs_valid == len(even)
    assert sum(stats.rejections.values()) == 6 - len(even)
    assert len(executor) == len(even)


def test_designs_longer_than_the_designer_budget_are_not_demonstrated():
    """With a byte tokenizer the reflection template is > 240 tokens: it could never be
    written whole by a designer limited to 240 tokens, so it is skipped before running."""
    from metaagentx.mas.templates import template_script
    from metaagentx.sft_data import fenced, generate_demonstrations

    tasks = load_tasks("generated:arith", limit=2)
    assert len(fenced(template_script("single", tasks[0]))) < 240
    gen = ScriptedGenerator(agent_reply)
    designer, _, stats = asyncio.run(
        generate_demonstrations(
            tasks,
            gen,
            _cfg("--generation.designer_max_tokens=240"),
            samples_per_task=2,
            progress=False,
            structures=("single", "reflection"),
        )
    )
    assert stats.rejections == {"longer_than_designer_max_tokens": 2}
    assert all(d["provenance"]["structure"] == "single" for d in designer)
    assert stats.executions == 2
