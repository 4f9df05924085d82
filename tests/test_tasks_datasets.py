"""Loaders on the real benchmark files, on malformed rows, HF mappings and generated tasks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from metaagentx.tasks.datasets import DatasetError, load_tasks
from metaagentx.tasks.generated import generate_tasks
from metaagentx.tasks.hf import mapping_for, tasks_from_rows

COUNTS = {
    "aime24": 30,
    "aime25": 30,
    "olympiadbench": 675,
    "livecodebench": 279,
    "apps": 128,
    "codecontests": 165,
    "train_math": 7470 + 975,
    "train_code": 1768 + 408 + 299,
}


@pytest.fixture(autouse=True)
def _point_at_data(data_dir, monkeypatch):
    monkeypatch.setenv("METAAGENTX_DATA", str(data_dir))


@pytest.mark.parametrize("name", sorted(COUNTS))
def test_benchmark_counts_and_kinds(name):
    tasks = load_tasks(name)
    assert len(tasks) == COUNTS[name]
    kind = "math" if name in {"aime24", "aime25", "olympiadbench", "train_math"} else "code"
    assert {t.kind for t in tasks} == {kind}
    assert len({t.id for t in tasks}) == len(tasks)
    for t in tasks:
        if kind == "math":
            assert t.answer and t.tests is None
        else:
            assert t.tests and len(t.tests["inputs"]) == len(t.tests["outputs"]) >= 1
            assert t.answer is None


def test_known_answers_and_prompts():
    aime = {t.id: t for t in load_tasks("aime24")}
    assert aime["aime2024-I-01"].answer == "204"
    assert aime["aime2024-II-14"].answer == "211"
    assert load_tasks("aime25")[-1].answer == "240"  # II-15
    lcb = load_tasks("livecodebench")
    lc = next(t for t in lcb if t.tests.get("fn_name"))
    assert lc.starter_code.rstrip() in lc.prompt and "class `Solution`" in lc.prompt
    stdin = next(t for t in lcb if "fn_name" not in t.tests)
    assert "standard input" in stdin.prompt and stdin.starter_code == ""


def test_split_picks_files_and_path_specs(data_dir):
    assert len(load_tasks("train_code", split="leetcode")) == 1768
    assert len(load_tasks("train_math", split="aime")) == 975
    assert len(load_tasks(str(data_dir / "aime25" / "test.jsonl"))) == 30
    assert len(load_tasks(str(data_dir / "train_code"))) == COUNTS["train_code"]


def test_subsetting_is_deterministic():
    ids = [t.id for t in load_tasks("olympiadbench")]
    assert [t.id for t in load_tasks("olympiadbench", limit=5)] == ids[:5]  # seed 0: file order
    a = [t.id for t in load_tasks("olympiadbench", limit=5, seed=7)]
    b = [t.id for t in load_tasks("olympiadbench", limit=5, seed=7)]
    c = [t.id for t in load_tasks("olympiadbench", limit=5, seed=8)]
    assert a == b and a != c and a != ids[:5]
    assert [t.id for t in load_tasks("olympiadbench[10:20]")] == ids[10:20]
    assert [t.id for t in load_tasks("olympiadbench[::100]")] == ids[::100]
    assert [t.id for t in load_tasks("olympiadbench[-3:]")] == ids[-3:]
    shuffled = {t.id for t in load_tasks("olympiadbench[10:20]", seed=3)}
    assert shuffled == set(ids[10:20])


def _write(tmp_path: Path, rows: list) -> Path:
    path = tmp_path / "bad.jsonl"
    lines = [r if isinstance(r, str) else json.dumps(r) for r in rows]
    path.write_text("\n".join(lines) + "\n")
    return path


GOOD_MATH = {"id": "m1", "problem": "1+1?", "answer": "2"}
GOOD_CODE = {"id": "c1", "problem": "echo", "tests": {"inputs": ["1\n"], "outputs": ["1\n"]}}


@pytest.mark.parametrize(
    "bad, field",
    [
        ({"id": "m2", "problem": "x"}, "'answer'"),
        ({"id": "m2", "problem": "x", "answer": ""}, "'answer'"),
        ({"problem": "x", "answer": "1"}, "'id'"),
        ({"id": "m2", "answer": "1"}, "'problem'"),
        ({"id": "c2", "problem": "x", "tests": {"inputs": ["1"]}}, "'tests.outputs'"),
        ({"id": "c2", "problem": "x", "tests": {"inputs": ["1"], "outputs": []}}, "'tests'"),
        ({"id": "c2", "problem": "x", "tests": {"inputs": [1], "outputs": ["1"]}}, "inputs[0]"),
        (
            {"id": "c2", "problem": "x", "tests": {"fn_name": "f", "inputs": [1], "outputs": [1]}},
            "inputs[0]",
        ),
        (
            {
                "id": "c2",
                "problem": "x",
                "tests": {"fn_name": "a b", "inputs": [[1]], "outputs": [1]},
            },
            "fn_name",
        ),
        ('{"id": "m2", "problem": ', "invalid JSON"),
        ([1, 2], "expected a JSON object"),
    ],
)
def test_malformed_rows_name_file_line_and_field(tmp_path, bad, field):
    path = _write(tmp_path, [GOOD_MATH, GOOD_CODE, bad])
    with pytest.raises(DatasetError) as err:
        load_tasks(str(path))
    assert f"{path}:3:" in str(err.value)
    assert field in str(err.value)


def test_unknown_spec_and_missing_data(tmp_path, monkeypatch):
    with pytest.raises(DatasetError, match="unknown dataset"):
        load_tasks("no_such_benchmark")
    monkeypatch.setenv("METAAGENTX_DATA", str(tmp_path / "absent"))
    with pytest.raises(DatasetError, match="METAAGENTX_DATA"):
        load_tasks("aime24")


def test_generated_tasks_are_seeded_and_exact():
    a = load_tasks("generated:mixed", limit=30, seed=4)
    assert [t.prompt for t in a] == [
        t.prompt for t in load_tasks("generated:mixed", limit=30, seed=4)
    ]
    assert [t.prompt for t in a] != [
        t.prompt for t in load_tasks("generated:mixed", limit=30, seed=5)
    ]
    assert [t.id for t in a[:10]] == [t.id for t in load_tasks("generated:mixed", limit=10, seed=4)]
    kinds = {t.meta["generated_kind"] for t in generate_tasks("mixed", count=200, seed=1)}
    assert kinds == {"arith", "mult", "word_add", "word_sub", "word_mult"}
    for t in generate_tasks("arith", count=50, seed=2):
        a_, b_ = t.prompt.removeprefix("What is ").removesuffix("?").split(" + ")
        assert int(t.answer) == int(a_) + int(b_) and 0 <= int(a_) <= 9
    for t in generate_tasks("mult", count=50, seed=2):
        a_, b_ = t.prompt.removeprefix("What is ").removesuffix("?").split(" * ")
        assert int(t.answer) == int(a_) * int(b_)
    for t in generate_tasks("word", count=60, seed=2):
        nums = [int(w) for w in t.prompt.replace(".", " ").split() if w.isdigit()]
        op = {"word_add": int.__add__, "word_sub": int.__sub__, "word_mult": int.__mul__}
        assert int(t.answer) == op[t.meta["generated_kind"]](*nums)
    with pytest.raises(ValueError, match="arith"):
        load_tasks("generated:cubes")


def test_hf_mappings_on_local_rows(tmp_path):
    aime = [{"id": 60, "problem": "P?", "answer": "025", "solution": "s", "url": "u"}]
    t = tasks_from_rows(aime, mapping=mapping_for("HuggingFaceH4/aime_2024"), source="x")[0]
    assert (t.id, t.answer, t.kind) == ("60", "25", "math")
    ob = [
        {"id": 1606, "question": "Q", "final_answer": ["2"], "solution": ["sol"], "context": None}
    ]
    assert tasks_from_rows(ob, mapping="olympiadbench", source="ob")[0].answer == "2"
    math_rows = [{"problem": "P", "solution": "so $\\boxed{\\frac{1}{2}}$.", "level": "Level 1"}]
    assert tasks_from_rows(math_rows, mapping="math", source="m")[0].answer == "\\frac{1}{2}"
    apps = [
        {
            "problem_id": 7,
            "question": "Q",
            "starter_code": "def f(x):\n",
            "input_output": json.dumps({"fn_name": "f", "inputs": [[1]], "outputs": [[2]]}),
            "difficulty": "introductory",
        }
    ]
    t = tasks_from_rows(apps, mapping=mapping_for("codeparrot/apps"), source="apps")[0]
    assert t.tests == {"inputs": [[1]], "outputs": [2], "fn_name": "f"} and t.id == "apps-7"
    cc = [
        {
            "name": "1A",
            "description": "D",
            "difficulty": 7,
            "public_tests": {"input": ["1\n"], "output": ["2\n"]},
            "private_tests": {"input": ["3\n"], "output": ["4\n"]},
            "generated_tests": None,
        }
    ]
    t = tasks_from_rows(cc, mapping=mapping_for("deepmind/code_contests"), source="cc")[0]
    assert t.tests == {"inputs": ["1\n", "3\n"], "outputs": ["2\n", "4\n"]}
    lcb = [
        {
            "question_id": "9",
            "question_content": "Q",
            "starter_code": "class Solution:\n",
            "platform": "leetcode",
            "difficulty": "easy",
            "public_test_cases": json.dumps(
                [{"input": "[1, 2]\n3", "output": "4", "testtype": "functional"}]
            ),
            "private_test_cases": _lcb_blob(
                [{"input": "[5]\n1", "output": "6", "testtype": "functional"}]
            ),
            "metadata": json.dumps({"func_name": "add"}),
        }
    ]
    t = tasks_from_rows(
        lcb, mapping=mapping_for("livecodebench/code_generation_lite"), source="lcb"
    )[0]
    assert t.tests == {"fn_name": "add", "inputs": [[[1, 2], 3], [[5], 1]], "outputs": [4, 6]}
    with pytest.raises(DatasetError, match="row 0: field 'answer'"):
        tasks_from_rows([{"problem": "P"}], mapping="generic", source="g")


def _lcb_blob(cases: list) -> str:
    import base64
    import pickle
    import zlib

    return base64.b64encode(zlib.compress(pickle.dumps(json.dumps(cases)))).decode()


def test_hf_spec_without_datasets_package_says_how_to_install():
    import importlib.util

    if importlib.util.find_spec("datasets") is not None:
        pytest.skip("the datasets package is installed here")
    with pytest.raises(DatasetError, match="pip install"):
        load_tasks("hf:HuggingFaceH4/aime_2024@train")
