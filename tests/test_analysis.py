"""Analyses over the recorded fixture run tests/fixtures/run_small (answers worked out by hand).

The fixture has two evaluations of the same six tasks (step_000000 -> step_000008):
  aime24-I-01       single wrong (2 samples)   -> single right        execution
  aime24-I-02       single wrong               -> reflection right    design
  abc367_a          solver_tester right        -> solver_tester wrong newly_failed
  abc367_b          ensemble right             -> ensemble right      both_solved
  apps-4004         debate wrong               -> router wrong        both_failed
  olympiadbench-1606 single wrong              -> ensemble right      design
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from metaagentx import analysis as A

RUN = Path(__file__).parent / "fixtures" / "run_small"


@pytest.fixture(scope="module")
def evals() -> dict[str, list[dict]]:
    return A.read_eval(RUN)


def test_readers_tolerate_a_truncated_last_line(tmp_path: Path) -> None:
    with pytest.warns(UserWarning, match="truncated last line"):
        metrics = A.read_metrics(RUN)
    assert [m["step"] for m in metrics] == list(range(8))
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"a": 1}\n{"a": \n{"a": 3}\n')
    with pytest.raises(ValueError, match=r"bad\.jsonl:2: not valid JSON"):
        A.read_jsonl(bad)


def test_eval_sets_in_natural_order(tmp_path: Path, evals) -> None:
    assert list(evals) == ["step_000000", "step_000008"]
    for label in ("step_10", "step_9"):
        (tmp_path / "eval" / label).mkdir(parents=True)
        (tmp_path / "eval" / label / "items.jsonl").write_text("")
    assert list(A.find_eval_sets(tmp_path)) == ["step_9", "step_10"]
    one = RUN / "eval" / "step_000008"
    assert list(A.find_eval_sets(one)) == ["step_000008"]
    assert list(A.find_eval_sets(one / "items.jsonl")) == ["step_000008"]


def test_structure_distribution_comes_from_the_script(evals) -> None:
    after = evals["step_000008"]
    assert after[0]["structure"] == "debate"  # what the record claims; the script is single
    assert A.structure_distribution(after) == {
        "aime24": {"single": 1, "reflection": 1},
        "apps": {"router": 1},
        "livecodebench": {"ensemble": 1, "solver_tester": 1},
        "olympiadbench": {"ensemble": 1},
    }
    assert A.structure_distribution(evals["step_000000"])["apps"] == {"debate": 1}


def test_item_structure_without_script_uses_the_recorded_template() -> None:
    assert A.item_structure({"script": "", "structure": "reflection"}) == "reflection"
    assert A.item_structure({"script": "", "structure": "my own thing"}) == "other"


def test_attribution_every_outcome(evals) -> None:
    att = A.attribution(evals["step_000000"], evals["step_000008"])
    assert att.counts == {
        "execution": 1,
        "design": 2,
        "newly_failed": 1,
        "both_solved": 1,
        "both_failed": 1,
    }
    assert att.tasks["execution"] == [("aime24", "aime2024-I-01")]
    assert att.tasks["design"] == [
        ("aime24", "aime2024-I-02"),
        ("olympiadbench", "olympiadbench-1606"),
    ]
    assert att.tasks["newly_failed"] == [("livecodebench", "abc367_a")]
    assert att.tasks["both_failed"] == [("apps", "apps-4004")]
    assert att.design_share == pytest.approx(2 / 3)
    assert att.by_benchmark()["aime24"] == {
        "execution": 1,
        "design": 1,
        "newly_failed": 0,
        "both_solved": 0,
        "both_failed": 0,
    }
    assert att.by_benchmark()["livecodebench"]["newly_failed"] == 1
    assert list(att.by_benchmark()) == ["aime24", "apps", "livecodebench", "olympiadbench"]
    assert att.unmatched == 0
    assert att.structure_changes == {
        "single -> ensemble": 1,
        "single -> reflection": 1,
        "debate -> router": 1,
    }


def test_attribution_pools_samples_and_counts_unmatched() -> None:
    s = "a = Agent('x')\nsubmit(a.ask(QUESTION))"
    row = {"benchmark": "b", "script": s}
    before = [{**row, "task_id": "t", "reward": r} for r in (1.0, 0.0, 0.0)]  # 1/3: unsolved
    after = [{**row, "task_id": "t", "reward": r} for r in (1.0, 1.0, 0.0)]  # 2/3: solved
    after.append({**row, "task_id": "only-after", "reward": 1.0})
    att = A.attribution(before, after)
    assert att.counts["execution"] == 1 and att.unmatched == 1
    with pytest.raises(ValueError, match="'reward'"):
        A.attribution([{"benchmark": "b", "task_id": "t"}], after)


def test_diversity(evals) -> None:
    div = A.diversity(evals["step_000008"])
    assert div["systems"] == 6
    assert div["agents"] == 13  # 1 + 2 + 1 + 4 + 2 + 3
    assert div["distinct_role_names"] == 8
    assert div["unique_prompt_fraction"] == pytest.approx(8 / 13)
    assert div["calls_per_execution"] == pytest.approx(15 / 6)
    # "", "Solve it.", "Solve.", "Find errors.", "Write Python.", "Pick one.", "Answer math or code."
    assert div["distinct_system_prompts"] == 7


def test_cost_by_structure(evals) -> None:
    cost = A.cost_by_structure(evals["step_000008"])
    assert list(cost) == ["single", "reflection", "ensemble", "solver_tester", "router"]
    assert cost["ensemble"] == {
        "items": 2,
        "tasks": 2,
        "accuracy": 1.0,
        "tokens_per_task": 525.0,
        "calls_per_task": 3.5,
    }
    assert cost["solver_tester"]["accuracy"] == 0.0
    assert cost["reflection"]["tokens_per_task"] == 420.0
    assert cost["reflection"]["calls_per_task"] == 4.0  # the designer call is a cost too


def test_accuracy_and_paper_table(evals) -> None:
    acc = A.accuracy_by_benchmark(evals["step_000008"])
    assert acc == {"aime24": 1.0, "apps": 0.0, "livecodebench": 0.5, "olympiadbench": 1.0}
    assert A.accuracy_by_benchmark(evals["step_000000"])["aime24"] == 0.0  # 0 of 3 samples
    table = A.paper_table({"RL step 8": acc, "demo": {"generated:arith": 0.25}}, reference=True)
    lines = table.splitlines()
    assert lines[0] == (
        "| Method | AIME24 | AIME25 | OlympiadBench | LiveCodeBench | APPS | "
        "CodeContests | generated:arith | Avg. |"
    )
    assert lines[2] == "| RL step 8 | 100.00 | – | 100.00 | 50.00 | 0.00 | – | – | 62.50* |"
    assert lines[3].endswith("| 25.00 | 25.00* |")
    assert "quoted from the paper" in lines[4] and lines[4].endswith("| 38.33 |")
    assert lines[5].endswith("| 27.16 |")


def test_phase_spans() -> None:
    with pytest.warns(UserWarning):
        metrics = A.read_metrics(RUN)
    assert A.phase_spans(metrics) == [("executor", 0, 3), ("designer", 4, 7)]


def test_items_from_training_samples() -> None:
    pairs = A.read_samples(RUN)
    assert [step for step, _ in pairs] == [6, 6]
    items = A.items_from_episodes(pairs)
    assert len(items) == 4
    first = items[0]
    assert first["benchmark"] == "generated:arith" and first["reward"] == 1.0
    assert first["tokens_in"] == 45 and first["tokens_out"] == 8 and first["calls"] == 2
    assert A.item_structure(first) == "reflection"
    assert items[3]["outcome"] == "timeout" and items[3]["calls"] == 0
    json.dumps(items)  # plain JSON all the way down
