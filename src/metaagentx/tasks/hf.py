"""Hugging Face datasets -> shared/data rows -> ``Task``, with one field mapping per benchmark.

Used through ``load_tasks("hf:<dataset id>[:config][@split]")``, e.g.
``load_tasks("hf:HuggingFaceH4/aime_2024@train")``. Needs the optional ``datasets`` package
(``pip install datasets``). The mapping is chosen from the dataset id (``MAPPING_BY_ID``,
matched case-insensitively on the part after the owner); unknown ids get ``generic``, which
looks for the usual field names. Each mapping turns one source row into a row of the
shared/data schema, which is then validated like a local row (errors name the row index).
"""

from __future__ import annotations

import base64
import io
import json
import pickle
import re
import zlib
from collections.abc import Callable, Iterable
from typing import Any

from metaagentx.tasks.datasets import DatasetError, task_from_row
from metaagentx.types import Task

Row = dict[str, Any]


def _math(row: Row, *, problem: str, answer: str, ident: str | None, source: str) -> Row:
    value = row.get(answer)
    if isinstance(value, list):  # OlympiadBench keeps a list of final answers
        value = ", ".join(str(v) for v in value)
    out: Row = {"problem": row.get(problem), "answer": value, "source": source}
    out["id"] = str(row[ident]) if ident and row.get(ident) is not None else None
    solution = row.get("solution")
    if isinstance(solution, list):
        solution = solution[0] if solution else None
    if solution is not None:
        out["solution"] = solution
    return out


def map_aime(row: Row) -> Row:
    """HuggingFaceH4/aime_2024, Maxwell-Jia/AIME_2024, yentinglin/aime_2025 and similar."""
    keys = {k.lower(): k for k in row}
    problem = keys.get("problem") or keys.get("question") or "problem"
    answer = keys.get("answer") or "answer"
    ident = keys.get("id")
    out = _math(row, problem=problem, answer=answer, ident=ident, source="AIME")
    if isinstance(out["answer"], str) and out["answer"].strip().isdigit():
        out["answer"] = str(int(out["answer"]))  # "025" -> "25"
    elif isinstance(out["answer"], int):
        out["answer"] = str(out["answer"])
    return out


def map_olympiadbench(row: Row) -> Row:
    """Hothan/OlympiadBench (question, final_answer list, solution list, context)."""
    problem = row.get("question")
    if row.get("context"):
        problem = f"{row['context']}\n\n{problem}"
    out = _math(
        {**row, "question": problem},
        problem="question",
        answer="final_answer",
        ident="id",
        source="OlympiadBench",
    )
    return out


def map_math(row: Row) -> Row:
    """hendrycks MATH copies: problem, solution (answer = last \\boxed{} of the solution)."""
    answer = row.get("answer")
    if answer is None and isinstance(row.get("solution"), str):
        from metaagentx.tasks.math import last_boxed

        answer = last_boxed(row["solution"])
    return {
        "id": row.get("unique_id") or row.get("id"),
        "problem": row.get("problem"),
        "answer": answer,
        "source": "MATH",
        "meta": {k: row[k] for k in ("level", "type", "subject") if k in row},
    }


def map_apps(row: Row) -> Row:
    """codeparrot/apps: question, input_output (JSON text), starter_code, difficulty."""
    io_spec = _maybe_json(row.get("input_output"))
    tests: Row | None = None
    if isinstance(io_spec, dict):
        tests = {"inputs": io_spec.get("inputs"), "outputs": io_spec.get("outputs")}
        if io_spec.get("fn_name"):
            tests["fn_name"] = io_spec["fn_name"]
            # APPS wraps each expected return value in a one-element list
            tests["outputs"] = [
                o[0] if isinstance(o, list) and len(o) == 1 else o for o in tests["outputs"] or []
            ]
    return {
        "id": f"apps-{row.get('problem_id')}",
        "problem": row.get("question"),
        "tests": tests,
        "starter_code": row.get("starter_code") or "",
        "difficulty": row.get("difficulty"),
        "source": "APPS",
    }


def map_codecontests(row: Row) -> Row:
    """deepmind/code_contests: description, public/private/generated tests {input, output}."""
    inputs: list[str] = []
    outputs: list[str] = []
    for key in ("public_tests", "private_tests", "generated_tests"):
        part = row.get(key) or {}
        inputs.extend(part.get("input") or [])
        outputs.extend(part.get("output") or [])
    return {
        "id": f"codecontests-{row.get('name')}",
        "problem": row.get("description"),
        "tests": {"inputs": inputs, "outputs": outputs},
        "starter_code": "",
        "difficulty": str(row.get("difficulty")),
        "source": "CodeContests",
    }


def map_livecodebench(row: Row) -> Row:
    """livecodebench/code_generation_lite: public (+ private, when decodable) test cases."""
    cases = list(_maybe_json(row.get("public_test_cases")) or [])
    cases += _lcb_private(row.get("private_test_cases"))
    meta = _maybe_json(row.get("metadata")) or {}
    functional = bool(cases) and cases[0].get("testtype") == "functional"
    if functional:
        tests: Row = {
            "fn_name": meta.get("func_name"),
            "inputs": [[json.loads(a) for a in c["input"].split("\n") if a] for c in cases],
            "outputs": [json.loads(c["output"]) for c in cases],
        }
    else:
        tests = {"inputs": [c["input"] for c in cases], "outputs": [c["output"] for c in cases]}
    return {
        "id": f"lcb-{row.get('question_id')}",
        "problem": row.get("question_content"),
        "tests": tests,
        "starter_code": row.get("starter_code") or "",
        "difficulty": row.get("difficulty"),
        "source": f"LiveCodeBench ({row.get('platform')})",
    }


class _StrOnly(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:  # no globals: plain data only
        raise pickle.UnpicklingError(f"refusing to load {module}.{name}")


def _lcb_private(blob: Any) -> list[Row]:
    """LCB private tests: JSON, or base64(zlib(pickle(json str))) decoded without globals."""
    if not blob:
        return []
    value = _maybe_json(blob)
    if isinstance(value, list):
        return value
    raw = zlib.decompress(base64.b64decode(blob))
    text = _StrOnly(io.BytesIO(raw)).load()
    return json.loads(text)


def map_generic(row: Row) -> Row:
    """Unknown datasets: take the usual field names (problem/question, answer, tests)."""
    keys = {k.lower(): k for k in row}
    problem = next((keys[k] for k in ("problem", "question", "prompt") if k in keys), "problem")
    if "tests" in keys or "input_output" in keys:
        tests = _maybe_json(row.get(keys.get("tests", keys.get("input_output", ""))))
        return {
            "id": row.get(keys.get("id", "id")),
            "problem": row.get(problem),
            "tests": tests,
            "starter_code": row.get("starter_code") or "",
            "source": "hf",
        }
    answer = next((keys[k] for k in ("answer", "final_answer", "solution") if k in keys), "answer")
    return _math(row, problem=problem, answer=answer, ident=keys.get("id"), source="hf")


MAPPINGS: dict[str, Callable[[Row], Row]] = {
    "aime": map_aime,
    "olympiadbench": map_olympiadbench,
    "math": map_math,
    "apps": map_apps,
    "codecontests": map_codecontests,
    "livecodebench": map_livecodebench,
    "generic": map_generic,
}
MAPPING_BY_ID = {
    "aime_2024": "aime",
    "aime_2025": "aime",
    "aime2025": "aime",
    "aime2024": "aime",
    "olympiadbench": "olympiadbench",
    "competition_math": "math",
    "hendrycks_math": "math",
    "math-lighteval": "math",
    "math-500": "math",
    "apps": "apps",
    "code_contests": "codecontests",
    "code_generation_lite": "livecodebench",
    "code_generation": "livecodebench",
}


def mapping_for(dataset_id: str) -> str:
    """The mapping name used for a dataset id (``generic`` when none is known)."""
    name = dataset_id.rsplit("/", 1)[-1].lower()
    return MAPPING_BY_ID.get(name, "generic")


def tasks_from_rows(rows: Iterable[Row], *, mapping: str, source: str) -> list[Task]:
    """Map source rows with ``MAPPINGS[mapping]`` and validate them; errors name the row."""
    if mapping not in MAPPINGS:
        raise DatasetError(f"unknown mapping {mapping!r}; choose one of {', '.join(MAPPINGS)}")
    fn = MAPPINGS[mapping]
    tasks = []
    for i, row in enumerate(rows):
        where = f"{source} row {i}"
        try:
            mapped = fn(dict(row))
        except (KeyError, TypeError, ValueError, AttributeError, zlib.error) as exc:
            raise DatasetError(f"{where}: cannot map with {mapping!r}: {exc!r}") from None
        if mapped.get("id") in (None, "", "None"):
            mapped["id"] = f"{source}-{i}"
        tasks.append(task_from_row(mapped, where=where, source=source))
    return tasks


_HF_SPEC = re.compile(r"^(?P<id>[^:@]+)(?::(?P<config>[^@]+))?(?:@(?P<split>.+))?$")


def load_hf_tasks(spec: str, *, split: str | None = None) -> list[Task]:
    """Load ``<dataset id>[:config][@split]`` with the ``datasets`` library and map it."""
    m = _HF_SPEC.match(spec)
    if not m:
        raise DatasetError(f"bad hf spec {spec!r}; expected hf:<dataset id>[:config][@split]")
    try:
        import datasets
    except ImportError:
        raise DatasetError(
            "hf: specs need the 'datasets' package, which is not installed: pip install datasets"
        ) from None
    split = m.group("split") or split or "test"
    ds = datasets.load_dataset(m.group("id"), m.group("config"), split=split)
    return tasks_from_rows(ds, mapping=mapping_for(m.group("id")), source=m.group("id"))


def _maybe_json(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value
