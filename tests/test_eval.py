"""Eval end to end on the scripted backend: rows, scores, tables, batching, resume."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest

from metaagentx.backends.scripted import ScriptedGenerator
from metaagentx.config import load_config
from metaagentx.tasks.datasets import load_tasks

DESIGN = "```python\nsolver = Agent('solver', 'Solve it.')\nanswer = single(solver, QUESTION)\nsubmit(answer)\n```"


def _is_designer(messages) -> bool:
    return any(m["role"] == "user" and m["content"].startswith("Design a team") for m in messages)


def answer_even_only(messages) -> str:
    """Designer: a valid single-agent script. Agents: right when a + b is even, else wrong."""
    if _is_designer(messages):
        return DESIGN
    a, b = map(int, re.search(r"What is (\d) \+ (\d)\?", messages[-1]["content"]).groups())
    s = a + b
    return f"So the answer is \\boxed{{{s if s % 2 == 0 else s + 1}}}."


def _cfg(*extra: str):
    return load_config(None, ["--mas.timeout_s=60", "--mas.concurrency=8", *extra])


def _run(tasks, gen, path: Path, mode="designed", label="m", samples=1):
    from metaagentx.eval import evaluate

    return asyncio.run(
        evaluate(
            {"generated:arith": tasks},
            gen,
            _cfg(),
            mode=mode,
            items_path=path,
            label=label,
            samples=samples,
            progress=False,
        )
    )


def _even(task) -> bool:
    return int(task.answer) % 2 == 0


def test_designed_eval_scores_rows_and_batches_calls(tmp_path):
    tasks = load_tasks("generated:arith", limit=6)
    gen = ScriptedGenerator(answer_even_only)
    rows = _run(tasks, gen, tmp_path / "items.jsonl", samples=2)
    assert len(rows) == 12
    file_rows = [json.loads(x) for x in (tmp_path / "items.jsonl").read_text().splitlines()]
    assert sorted((r["task_id"], r["sample"]) for r in file_rows) == sorted(
        (t.id, s) for t in tasks for s in (0, 1)
    )
    by_id = {t.id: t for t in tasks}
    for r in file_rows:
        assert r["reward"] == (1.0 if _even(by_id[r["task_id"]]) else 0.0)
        assert r["outcome"] == "submitted" and r["failure_reason"] is None
        assert r["structure"] == "single" and r["mode"] == "designed" and r["label"] == "m"
        assert r["calls"] == 2 and [e["role"] for e in r["exchanges"]] == ["designer", "executor"]
        assert r["tokens_in"] > 0 and r["tokens_out"] > 0
        assert "boxed" in r["response"] and "submit(answer)" in r["script"]
    assert gen.batches < gen.calls  # concurrent items were batched
    from metaagentx.eval import accuracy, validity_rate

    assert accuracy(rows) == sum(_even(t) for t in tasks) / 6
    assert validity_rate(rows) == 1.0


def test_rejected_designs_are_recorded_with_their_reason(tmp_path):
    gen = ScriptedGenerator(
        lambda m: "```python\nimport os\nsubmit(os.getcwd())\n```" if _is_designer(m) else "1"
    )
    rows = _run(load_tasks("generated:arith", limit=2), gen, tmp_path / "items.jsonl")
    assert [r["outcome"] for r in rows] == ["rejected", "rejected"]
    assert all(r["reward"] == 0.0 and r["failure_reason"] for r in rows)
    assert all(r["calls"] == 1 for r in rows)  # the designer call only; nothing was executed


def test_fixed_template_mode_runs_the_template(tmp_path):
    gen = ScriptedGenerator(
        lambda m: "CORRECT" if "reviewer" in m[0]["content"] else answer_even_only(m)
    )
    tasks = load_tasks("generated:arith", limit=3)
    rows = _run(tasks, gen, tmp_path / "items.jsonl", mode="fixed:reflection", label="refl")
    assert all(r["structure"] == "reflection" and r["mode"] == "fixed:reflection" for r in rows)
    assert all([e["agent"] for e in r["exchanges"]] == ["solver", "critic"] for r in rows)
    assert sum(r["reward"] for r in rows) == sum(_even(t) for t in tasks)


def test_resume_skips_finished_items_and_tolerates_a_cut_line(tmp_path):
    tasks = load_tasks("generated:arith", limit=5)
    path = tmp_path / "items.jsonl"
    full = _run(tasks, ScriptedGenerator(answer_even_only), path)
    lines = path.read_text().splitlines()
    # An interrupted run: three finished items and half of a fourth line.
    path.write_text("\n".join(lines[:3]) + "\n" + lines[3][: len(lines[3]) // 2])
    gen = ScriptedGenerator(answer_even_only)
    rows = _run(tasks, gen, path)
    designer_calls = sum(1 for p in gen.prompts if _is_designer(p))
    assert designer_calls == 2  # only the two unfinished items ran again
    again = [json.loads(x) for x in path.read_text().splitlines()]
    assert again[:3] == [json.loads(x) for x in lines[:3]]  # finished rows untouched
    assert len(again) == len(rows) == 5
    assert {(r["task_id"], r["sample"]) for r in again} == {(t.id, 0) for t in tasks}
    assert sorted(r["reward"] for r in again) == sorted(r["reward"] for r in full)
    gen3 = ScriptedGenerator(answer_even_only)
    _run(tasks, gen3, path)  # nothing left to do
    assert gen3.calls == 0


def test_items_of_another_mode_are_refused(tmp_path):
    from metaagentx.eval import EvalError

    path = tmp_path / "items.jsonl"
    _run(load_tasks("generated:arith", limit=1), ScriptedGenerator(answer_even_only), path)
    with pytest.raises(EvalError, match="choose another --label"):
        _run(load_tasks("generated:arith", limit=1), ScriptedGenerator(["1"]), path, mode="single")


def _row(bench, tid, reward, structure="single", sample=0, label="x"):
    return {
        "benchmark": bench,
        "task_id": tid,
        "sample": sample,
        "reward": reward,
        "structure": structure,
        "outcome": "submitted",
        "tokens_in": 10,
        "tokens_out": 4,
        "calls": 2,
        "label": label,
    }


def test_main_table_is_pass_at_1_per_benchmark_with_avg_last():
    from metaagentx.eval_tables import cost_table, main_table

    results = {
        "SA": [
            _row("aime24", "a", 1.0),
            _row("aime24", "a", 0.0, sample=1),
            _row("apps", "p", 0.0),
            _row("apps", "q", 1.0),
            _row("apps", "r", 1.0),
            _row("apps", "s", 1.0),
        ],
        "MetaAgent-X": [_row("aime24", "a", 1.0), _row("apps", "p", 0.5, "ensemble")],
    }
    assert main_table(results) == (
        "| Method | AIME24 | APPS | Avg |\n|---|---|---|---|\n"
        "| SA | 50.0 | 75.0 | 62.5 |\n| MetaAgent-X | 100.0 | 50.0 | 75.0 |\n"
    )
    cost = cost_table(results).splitlines()
    assert cost[2] == "| SA | single | 6 | 66.7 | 100.0 | 10 | 4 | 2.00 |"
    assert cost[3].startswith("| MetaAgent-X | ensemble | 1 | 50.0 |")


def test_cli_eval_then_side_by_side_table(tmp_path, capsys):
    from metaagentx.cli import main

    base = [
        "eval",
        "--benchmarks",
        "generated:arith",
        "--limit",
        "2",
        "--out",
        str(tmp_path),
        "--no-progress",
        "--generation.backend=scripted",
        "--mas.timeout_s=60",
    ]
    assert main([*base, "--mode", "single", "--label", "sa"]) == 0
    assert main([*base, "--mode", "fixed:reflection", "--label", "refl"]) == 0
    assert (tmp_path / "eval" / "sa" / "items.jsonl").is_file()
    assert "| sa |" in (tmp_path / "eval" / "sa" / "table.md").read_text()
    capsys.readouterr()
    assert (
        main(["eval", "--table", str(tmp_path / "eval" / "sa"), str(tmp_path / "eval" / "refl")])
        == 0
    )
    out = capsys.readouterr().out
    assert "| Method | generated:arith | Avg |" in out
    assert "| sa |" in out and "| refl |" in out and "| refl | reflection | 2 |" in out


def test_main_table_uses_the_paper_column_order():
    from metaagentx.eval_tables import main_table

    rows = [
        {"benchmark": "generated:arith", "reward": 1.0},
        {"benchmark": "codecontests", "reward": 0.0},
        {"benchmark": "aime24", "reward": 1.0},
        {"benchmark": "aime24", "reward": 0.0},
    ]
    head, _, row = main_table({"sa": rows}).splitlines()
    assert head == "| Method | AIME24 | CodeContests | generated:arith | Avg |"
    assert row == "| sa | 50.0 | 0.0 | 100.0 | 50.0 |"
