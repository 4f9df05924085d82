"""Benchmark and training-set loaders: JSONL rows (shared/data schema) -> ``Task`` records.

Entry point: ``load_tasks(spec, limit=..., seed=..., split=...)``; the ``eval`` and ``train``
commands call it (e.g. ``metaagentx eval --benchmarks aime24``).

``spec`` is one of

- a benchmark name: ``aime24``, ``aime25``, ``olympiadbench``, ``livecodebench``, ``apps``,
  ``codecontests``, ``train_math``, ``train_code`` -- the folder of that name in the data
  directory ($METAAGENTX_DATA, else ``shared/data`` beside the repository);
- a path to a JSONL file or to a folder of JSONL files in the same schema;
- ``hf:<dataset id>[:config][@split]`` -- a Hugging Face dataset, mapped field by field
  (see ``metaagentx.tasks.hf``; needs the optional ``datasets`` package);
- ``generated:<kind>`` with kind arith | mult | word | mixed (see ``metaagentx.tasks.generated``).

Any spec may end in a Python slice, ``aime24[0:10]`` or ``train_code[::5]``.

Subsetting is deterministic, in this order: the slice is taken in file order; then, only when
``seed`` is not 0, the rows are shuffled with ``random.Random(seed)``; then the first ``limit``
rows are kept (``limit=0`` keeps all). So ``seed=0`` means "file order" and any other seed a
reproducible shuffle. For ``generated:`` specs the seed picks the problems instead (they are
random already), and ``limit`` is how many to make (default 200).

``split`` picks files inside a folder: only files whose name starts with it
(``load_tasks("train_code", split="leetcode")``); for ``hf:`` specs it is the dataset split.

A malformed row raises ``DatasetError`` naming the file, the line number and the field.
"""

from __future__ import annotations

import json
import os
import random
import re
from pathlib import Path
from typing import Any

from metaagentx.types import Task

BENCHMARKS = (
    "aime24",
    "aime25",
    "olympiadbench",
    "livecodebench",
    "apps",
    "codecontests",
    "train_math",
    "train_code",
)
_SLICE = re.compile(r"^(?P<base>.+?)\[(?P<a>-?\d*)(?::(?P<b>-?\d*))?(?::(?P<c>-?\d*))?\]$")


class DatasetError(ValueError):
    """A dataset could not be found, or one of its rows does not follow the schema."""


def data_dir() -> Path:
    """The benchmark data folder: $METAAGENTX_DATA, else ``shared/data`` beside the repo."""
    env = os.environ.get("METAAGENTX_DATA")
    if env:
        path = Path(env).expanduser()
        if not path.is_dir():
            raise DatasetError(f"METAAGENTX_DATA={env!r} is not a folder")
        return path
    starts = [Path(__file__).resolve(), Path.cwd().resolve()]
    for start in starts:
        for parent in [start, *start.parents]:
            candidate = parent.parent / "shared" / "data"
            if (parent / "pyproject.toml").is_file() and candidate.is_dir():
                return candidate
    raise DatasetError(
        "benchmark data folder not found: set the METAAGENTX_DATA environment variable to the "
        "folder holding aime24/, aime25/, ... (or place it at ../shared/data beside the repo)"
    )


def load_tasks(spec: str, *, limit: int = 0, seed: int = 0, split: str | None = None) -> list[Task]:
    """Load tasks named by ``spec`` (see the module docstring for the forms and subsetting)."""
    base, slc = _split_slice(spec.strip())
    if base.startswith("generated:"):
        from metaagentx.tasks.generated import generate_tasks

        tasks = generate_tasks(base.split(":", 1)[1], count=limit or 200, seed=seed)
        return tasks[slc] if slc else tasks
    if base.startswith("hf:"):
        from metaagentx.tasks.hf import load_hf_tasks

        tasks = load_hf_tasks(base[3:], split=split)
    else:
        tasks = []
        for path in _resolve_files(base, split):
            tasks.extend(load_jsonl(path, source=_source_name(base, path)))
    if slc:
        tasks = tasks[slc]
    if seed:
        random.Random(seed).shuffle(tasks)
    return tasks[:limit] if limit > 0 else tasks


def _split_slice(spec: str) -> tuple[str, slice | None]:
    m = _SLICE.match(spec)
    if not m:
        return spec, None
    if m.group("b") is None:
        raise DatasetError(f"slice in {spec!r} needs a colon, e.g. {m.group('base')}[0:10]")
    parts = [int(x) if x else None for x in (m.group("a"), m.group("b"), m.group("c"))]
    return m.group("base"), slice(*parts)


def _resolve_files(base: str, split: str | None) -> list[Path]:
    if base in BENCHMARKS:
        path = data_dir() / base
        if not path.is_dir():
            raise DatasetError(f"benchmark {base!r}: folder {path} is missing")
    else:
        path = Path(base).expanduser()
        if not path.exists():
            raise DatasetError(
                f"unknown dataset {base!r}: not a benchmark name ({', '.join(BENCHMARKS)}), "
                "not an existing path, and not hf:<id> or generated:<kind>"
            )
    if path.is_file():
        return [path]
    files = sorted(path.glob("*.jsonl"))
    if split:
        files = [f for f in files if f.name.startswith(split)]
    if not files:
        extra = f" starting with {split!r}" if split else ""
        raise DatasetError(f"no .jsonl files{extra} in {path}")
    return files


def _source_name(base: str, path: Path) -> str:
    return base if base in BENCHMARKS else path.stem


def load_jsonl(path: str | Path, *, source: str = "") -> list[Task]:
    """Read one JSONL file in the shared/data schema; errors name the file, line and field."""
    path = Path(path)
    tasks = []
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            where = f"{path}:{lineno}"
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DatasetError(f"{where}: invalid JSON ({exc.msg})") from None
            tasks.append(task_from_row(row, where=where, source=source or path.stem))
    return tasks


def task_from_row(row: Any, *, where: str, source: str = "") -> Task:
    """Validate one row of the shared/data schema and turn it into a ``Task``.

    ``where`` ("file:line") prefixes every error so a bad row can be found.
    """
    if not isinstance(row, dict):
        raise DatasetError(f"{where}: row is {type(row).__name__}, expected a JSON object")
    task_id = _need_str(row, "id", where)
    problem = _need_str(row, "problem", where)
    meta = row.get("meta") or {}
    if not isinstance(meta, dict):
        raise DatasetError(f"{where}: field 'meta' must be an object")
    if "tests" in row:
        tests = check_tests(row["tests"], where)
        starter = row.get("starter_code") or ""
        if not isinstance(starter, str):
            raise DatasetError(f"{where}: field 'starter_code' must be a string")
        meta = {**meta, "difficulty": row.get("difficulty"), "row_source": row.get("source", "")}
        return Task(
            id=task_id,
            prompt=code_prompt(problem, starter, tests),
            kind="code",
            tests=tests,
            starter_code=starter,
            source=source,
            meta={**meta, "problem": problem},
        )
    if "answer" not in row:
        raise DatasetError(f"{where}: missing field 'answer' (math row) or 'tests' (code row)")
    answer = row["answer"]
    if isinstance(answer, (int, float)) and not isinstance(answer, bool):
        answer = str(answer)
    if not isinstance(answer, str) or not answer.strip():
        raise DatasetError(f"{where}: field 'answer' must be a non-empty string")
    if row.get("solution") is not None:
        meta = {**meta, "solution": row["solution"]}
    meta = {**meta, "row_source": row.get("source", "")}
    return Task(id=task_id, prompt=problem, kind="math", answer=answer, source=source, meta=meta)


def _need_str(row: dict, key: str, where: str) -> str:
    if key not in row:
        raise DatasetError(f"{where}: missing field {key!r}")
    value = row[key]
    if not isinstance(value, str) or not value.strip():
        raise DatasetError(f"{where}: field {key!r} must be a non-empty string")
    return value


def check_tests(tests: Any, where: str) -> dict[str, Any]:
    """Check ``tests`` is in the stdin/stdout or the call-based form; return it unchanged."""
    if not isinstance(tests, dict):
        raise DatasetError(f"{where}: field 'tests' must be an object")
    for key in ("inputs", "outputs"):
        if not isinstance(tests.get(key), list):
            raise DatasetError(f"{where}: field 'tests.{key}' must be a list")
    inputs, outputs = tests["inputs"], tests["outputs"]
    if len(inputs) != len(outputs):
        raise DatasetError(
            f"{where}: field 'tests': {len(inputs)} inputs but {len(outputs)} outputs"
        )
    if not inputs:
        raise DatasetError(f"{where}: field 'tests.inputs' is empty")
    if "fn_name" in tests:
        if not isinstance(tests["fn_name"], str) or not tests["fn_name"].isidentifier():
            raise DatasetError(f"{where}: field 'tests.fn_name' must be a Python identifier")
        for i, args in enumerate(inputs):
            if not isinstance(args, list):
                raise DatasetError(f"{where}: field 'tests.inputs[{i}]' must be an argument list")
    else:
        for key, values in (("inputs", inputs), ("outputs", outputs)):
            for i, value in enumerate(values):
                if not isinstance(value, str):
                    raise DatasetError(
                        f"{where}: field 'tests.{key}[{i}]' must be a string in the stdin/stdout "
                        "form (or give 'tests.fn_name' for the call-based form)"
                    )
    return tests


def code_prompt(problem: str, starter_code: str, tests: dict[str, Any]) -> str:
    """The prompt for a code task: statement, starter code and how input/output work."""
    fn_name = tests.get("fn_name")
    if fn_name and "class Solution" in starter_code:
        how = (
            f"Complete the method `{fn_name}` of class `Solution` in the starter code below. "
            "It is called with the test arguments and its return value is checked; "
            "do not read input or print."
        )
    elif fn_name:
        how = (
            f"Write a top-level Python function `{fn_name}`. It is called with the test "
            "arguments and its return value is checked; do not read input or print."
        )
    else:
        how = (
            "Write a complete Python program that reads the input from standard input and "
            "prints the answer to standard output."
        )
    parts = [problem.rstrip(), how]
    if starter_code.strip():
        parts.append(f"Starter code:\n```python\n{starter_code.rstrip()}\n```")
    parts.append("Give your final solution in one ```python code block.")
    return "\n\n".join(parts)
