"""Code reward: run a program against a task's tests inside the sandbox.

``code_reward(program, tests) -> 1.0 | 0.0`` (1.0 only when every test passes) and
``code_reward_details(...) -> dict`` (pass fraction, per-test status, first failure). Called by
``metaagentx.tasks.reward`` during training and ``metaagentx eval``; measured by
``python bench/rewards.py``.

Tests follow shared/data/MANIFEST.md: stdin/stdout (``{"inputs": [str], "outputs": [str]}``;
output compared line by line after stripping trailing whitespace and dropping trailing blank
lines) or call-based (``{"fn_name", "inputs": [[args]], "outputs": [ret]}``; the top-level
function ``fn_name``, or ``Solution().fn_name`` for LeetCode-style code, called with the
arguments; the return value must equal the expected JSON value, floats to 1e-6 relative).
Call-based programs run after a prelude of the usual imports (``typing``, ``collections``,
``itertools``, ...), as LeetCode does.

All tests of one program run in ONE sandboxed process (``metaagentx.mas.sandbox``): a small
harness (``_code_harness``) forks up to ``parallel`` workers that run the tests, each test
executing the program afresh (new namespace, its own stdin and capped stdout file, ``sys.exit``
caught), under a per-test wall-clock limit (``timeout_s``) and a CPU rlimit; a worker that
hangs, crashes or leaves threads behind is killed and replaced for the remaining tests.
Statuses: pass | wrong | error | timeout.
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
from pathlib import Path
from typing import Any

DEFAULT_MEMORY_MB = 1024  # address-space limit of the sandboxed harness and each test
MAX_OUTPUT_BYTES = 1 << 20  # a test printing more than this is killed and marked wrong
_HARNESS = Path(__file__).with_name("_code_harness.py")
_MARK = "MAX_HARNESS_RESULT "
_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)```", re.DOTALL)


def extract_program(text: str) -> str | None:
    """The last fenced code block in ``text``, preferring python-tagged blocks; None if none."""
    blocks = [(m.group(1).lower(), m.group(2)) for m in _FENCE.finditer(text or "")]
    if not blocks:
        return None
    python = [body for lang, body in blocks if lang in ("python", "py", "python3")]
    untagged = [body for lang, body in blocks if not lang]
    body = (python or untagged or [blocks[-1][1]])[-1]
    return body if body.strip() else None


@functools.lru_cache(maxsize=1)
def _harness_source() -> str:
    return _HARNESS.read_text()


def _default_parallel() -> int:
    return max(1, min(4, os.cpu_count() or 1))


def _job(program: str, tests: dict[str, Any], timeout_s: float, parallel: int | None) -> dict:
    return {
        "program": program,
        "tests": tests,
        "timeout_s": float(timeout_s),
        "parallel": parallel or _default_parallel(),
        "max_output": MAX_OUTPUT_BYTES,
    }


def _outer_timeout(job: dict) -> float:
    rounds = math.ceil(len(job["tests"]["inputs"]) / job["parallel"])
    return 10.0 + rounds * (job["timeout_s"] + 1.0)


def _summarize(job: dict, result: Any) -> dict[str, Any]:
    """Turn the sandbox result (harness report or failure) into the details dict."""
    n = len(job["tests"]["inputs"])
    marked = [line for line in result.stdout.splitlines() if line.startswith(_MARK)]
    report = None
    # Tests cannot write to the harness's stdout; more than one report, or a report from a
    # harness that did not exit cleanly, means a program tampered with it: nothing passes.
    if len(marked) == 1 and result.exit_code == 0:
        report = json.loads(marked[0][len(_MARK) :])
    if report is None:
        why = "timeout" if result.timed_out else "error"
        detail = result.killed_reason or (result.stderr or "")[-300:] or "harness gave no report"
        if len(marked) > 1:
            detail = "more than one harness report (tampering)"
        tests = [{"status": why, "detail": detail} for _ in range(n)]
    else:
        tests = report["results"]
    passed = sum(t["status"] == "pass" for t in tests)
    first = next(({"index": i, **t} for i, t in enumerate(tests) if t["status"] != "pass"), None)
    return {
        "reward": 1.0 if passed == n else 0.0,
        "pass_fraction": passed / n,
        "passed": passed,
        "total": n,
        "statuses": [t["status"] for t in tests],
        "first_failure": first,
        "reason": "passed" if first is None else first["status"],
    }


def _empty(tests: dict[str, Any], reason: str) -> dict[str, Any]:
    n = len(tests.get("inputs") or [])
    return {
        "reward": 0.0,
        "pass_fraction": 0.0,
        "passed": 0,
        "total": n,
        "statuses": [reason] * n,
        "first_failure": {"index": 0, "status": reason, "detail": ""},
        "reason": reason,
    }


def _check_tests(tests: Any) -> None:
    if not isinstance(tests, dict) or not tests.get("inputs"):
        raise ValueError("tests must be a dict with a non-empty 'inputs' list (MANIFEST schema)")
    if len(tests["inputs"]) != len(tests.get("outputs") or []):
        raise ValueError("tests: 'inputs' and 'outputs' differ in length")


def code_reward_details(
    program: str | None,
    tests: dict[str, Any],
    *,
    timeout_s: float = 6.0,
    memory_mb: int = DEFAULT_MEMORY_MB,
    parallel: int | None = None,
) -> dict[str, Any]:
    """Run ``program`` on every test in the sandbox; return reward, pass_fraction, statuses,
    first_failure {index, status, detail} and reason (passed | wrong | error | timeout |
    no_program)."""
    _check_tests(tests)
    if not program or not program.strip():
        return _empty(tests, "no_program")
    from metaagentx.mas.sandbox import run_untrusted

    job = _job(program, tests, timeout_s, parallel)
    result = run_untrusted(
        _harness_source(),
        timeout_s=_outer_timeout(job),
        memory_mb=memory_mb,
        stdin=json.dumps(job),
    )
    return _summarize(job, result)


async def code_reward_details_async(
    program: str | None,
    tests: dict[str, Any],
    *,
    timeout_s: float = 6.0,
    memory_mb: int = DEFAULT_MEMORY_MB,
    parallel: int | None = None,
) -> dict[str, Any]:
    """``code_reward_details`` for asyncio code (the sandbox process is awaited, not joined)."""
    _check_tests(tests)
    if not program or not program.strip():
        return _empty(tests, "no_program")
    from metaagentx.mas.sandbox import run_untrusted_async

    job = _job(program, tests, timeout_s, parallel)
    result = await run_untrusted_async(
        _harness_source(),
        timeout_s=_outer_timeout(job),
        memory_mb=memory_mb,
        stdin=json.dumps(job),
    )
    return _summarize(job, result)


def code_reward(program: str | None, tests: dict[str, Any], *, timeout_s: float = 6.0) -> float:
    """1.0 when ``program`` passes every test in ``tests`` (run in the sandbox), else 0.0."""
    return code_reward_details(program, tests, timeout_s=timeout_s)["reward"]
