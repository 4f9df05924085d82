"""Benchmark: code-reward tests per second vs a fresh interpreter per test; math checks per second.

    .venv/bin/python bench/rewards.py                   # 20 LeetCode + 10 stdin programs
    .venv/bin/python bench/rewards.py --leetcode 40 --repeat 2

Programs and tests (the same for both sides): the reference solutions of the first
``--leetcode`` rows of train_code/leetcode_train.jsonl with their call-based tests, plus stdin
programs: two real rows (codecontests test 000, codeforces 2024 000) solved by hand-written
programs and synthetic stdin problems with 10 seeded tests each.

* measured  ``code_reward_details``: one sandboxed harness per program, a fork per test, tests
  of a program in parallel (the default bound); programs scored one after another.
* baseline  the way the reference implementation does it: for every test a fresh
  ``python`` subprocess (this interpreter, ``-I``) runs the program (call-based: program +
  one call, result printed as JSON), no sandbox, outputs compared the same way.

Both must agree on which programs pass (checked). Then math: ``math_reward`` on a fixed list
of (response, answer) pairs, verifications per second after the worker pool is warm.
Prints rates and the ratio; needs the benchmark data ($METAAGENTX_DATA or ../shared/data).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

CALL_TEMPLATE = """{prelude}
{program}

import json as _json
_args = _json.loads({args!r})
_sol = globals().get("Solution")
_fn = getattr(_sol(), {fn!r}) if _sol is not None and hasattr(_sol, {fn!r}) else globals()[{fn!r}]
print(_json.dumps(_fn(*_args)))
"""

STDIN_PROGRAMS = {
    "sum": (
        "n = int(input())\nprint(sum(map(int, input().split())))\n",
        lambda xs: f"{len(xs)}\n{' '.join(map(str, xs))}\n",
        lambda xs: f"{sum(xs)}\n",
    ),
    "sort": (
        "input()\nprint(*sorted(map(int, input().split())))\n",
        lambda xs: f"{len(xs)}\n{' '.join(map(str, xs))}\n",
        lambda xs: " ".join(map(str, sorted(xs))) + "\n",
    ),
    "max": (
        "import sys\ndata = sys.stdin.read().split()\nprint(max(map(int, data[1:])))\n",
        lambda xs: f"{len(xs)}\n{' '.join(map(str, xs))}\n",
        lambda xs: f"{max(xs)}\n",
    ),
}
CC_SORT = """n, m = map(int, input().split())
books = [input().strip() for _ in range(n)]
def key(i):
    return tuple(ord(c) if j % 2 == 0 else -ord(c) for j, c in enumerate(books[i]))
print(*[i + 1 for i in sorted(range(n), key=key)])
"""
CF_MINMAX = """t = int(input())
for _ in range(t):
    x, y = map(int, input().split())
    print(min(x, y), max(x, y))
"""


def workload(n_leetcode: int, n_synthetic: int) -> list[tuple[str, str, dict]]:
    """(name, program, tests) triples: LeetCode reference solutions and stdin programs."""
    from metaagentx.tasks.datasets import load_tasks

    items = []
    for task in load_tasks("train_code", split="leetcode")[:n_leetcode]:
        items.append((task.id, task.meta["reference_solution"], task.tests))
    real = {
        t.id: t
        for t in load_tasks("codecontests[0:1]") + load_tasks("train_code", split="codeforces")
    }
    items.append(("codecontests-test-000", CC_SORT, real["codecontests-test-000"].tests))
    items.append(("codeforces2024-000", CF_MINMAX, real["codeforces2024-000"].tests))
    rng = random.Random(0)
    for k in range(n_synthetic):
        name = sorted(STDIN_PROGRAMS)[k % len(STDIN_PROGRAMS)]
        program, make_in, make_out = STDIN_PROGRAMS[name]
        cases = [[rng.randint(-99, 99) for _ in range(rng.randint(1, 30))] for _ in range(10)]
        tests = {"inputs": [make_in(c) for c in cases], "outputs": [make_out(c) for c in cases]}
        items.append((f"synthetic-{name}-{k}", program, tests))
    return items


def _lines(text: str) -> list[str]:
    lines = [line.rstrip() for line in text.split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def baseline_one(program: str, tests: dict, timeout_s: float, workdir: str) -> bool:
    """Every test in a fresh interpreter, sequentially, like the reference implementation."""
    from metaagentx.tasks._code_harness import PRELUDE

    path = os.path.join(workdir, "prog.py")
    ok = True
    for i, inp in enumerate(tests["inputs"]):
        if "fn_name" in tests:
            src = CALL_TEMPLATE.format(
                prelude=PRELUDE, program=program, args=json.dumps(inp), fn=tests["fn_name"]
            )
            stdin = ""
        else:
            src, stdin = program, inp
        with open(path, "w") as fh:
            fh.write(src)
        try:
            proc = subprocess.run(
                [sys.executable, "-I", path],
                input=stdin,
                capture_output=True,
                text=True,
                timeout=timeout_s,
            )
        except subprocess.TimeoutExpired:
            ok = False
            continue
        if "fn_name" in tests:
            try:
                passed = json.loads(proc.stdout) == tests["outputs"][i]
            except ValueError:
                passed = False
        else:
            passed = _lines(proc.stdout) == _lines(tests["outputs"][i])
        ok = ok and passed and proc.returncode == 0
    return ok


def bench_code(items: list, repeat: int, timeout_s: float) -> tuple[float, float]:
    from metaagentx.tasks.code import code_reward_details

    n_tests = sum(len(t["inputs"]) for _, _, t in items) * repeat
    code_reward_details("print(1)", {"inputs": [""], "outputs": ["1"]})  # start the sandbox
    t0 = time.perf_counter()
    ours = [
        code_reward_details(p, t, timeout_s=timeout_s)["reward"] == 1.0
        for _ in range(repeat)
        for _, p, t in items
    ]
    t_ours = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as workdir:
        t0 = time.perf_counter()
        base = [baseline_one(p, t, timeout_s, workdir) for _ in range(repeat) for _, p, t in items]
        t_base = time.perf_counter() - t0
    if ours != base:
        diff = [items[i % len(items)][0] for i, (a, b) in enumerate(zip(ours, base)) if a != b]
        raise SystemExit(f"measured and baseline disagree on: {diff}")
    print(f"programs: {len(items)} x {repeat}, tests: {n_tests}, passing: {sum(ours)}")
    print(f"code_reward (sandbox harness):   {n_tests / t_ours:8.1f} tests/s  ({t_ours:.2f} s)")
    print(f"baseline (interpreter per test): {n_tests / t_base:8.1f} tests/s  ({t_base:.2f} s)")
    print(f"ratio: {t_base / t_ours:.2f}x")
    return n_tests / t_ours, n_tests / t_base


MATH_PAIRS = [
    (r"\boxed{204}", "204"),
    (r"\boxed{203}", "204"),
    (r"\boxed{\frac{1}{2}}", "0.5"),
    (r"\boxed{\sqrt{8}}", r"2\sqrt{2}"),
    (r"\boxed{(1,2)}", "(1,2)"),
    (r"\boxed{[1,2)}", "(1,2)"),
    (r"\boxed{(x+1)^2}", "x^2+2x+1"),
    (r"The answer is 25.", "25"),
    (r"\boxed{\frac{1}{2(n+1)}}", r"\frac{1}{2n+2}"),
    (r"\boxed{3\pi}", r"3\pi"),
]


def bench_math(rounds: int) -> float:
    from metaagentx.tasks.math import math_reward

    math_reward(r"\boxed{1}", "1")  # start a worker
    t0 = time.perf_counter()
    for _ in range(rounds):
        for response, answer in MATH_PAIRS:
            math_reward(response, answer)
    rate = rounds * len(MATH_PAIRS) / (time.perf_counter() - t0)
    print(f"math_reward: {rate:8.1f} verifications/s (one thread)")
    pairs = MATH_PAIRS * rounds
    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(lambda ra: math_reward(*ra), MATH_PAIRS * 2))  # warm every worker
        t0 = time.perf_counter()
        list(pool.map(lambda ra: math_reward(*ra), pairs))
    threaded = len(pairs) / (time.perf_counter() - t0)
    print(f"math_reward: {threaded:8.1f} verifications/s (4 threads, worker pool)")
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--leetcode", type=int, default=20, help="LeetCode programs")
    parser.add_argument("--synthetic", type=int, default=6, help="synthetic stdin programs")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=6.0, help="per-test limit, s")
    parser.add_argument("--math-rounds", type=int, default=10)
    args = parser.parse_args()
    items = workload(args.leetcode, args.synthetic)
    bench_code(items, args.repeat, args.timeout)
    bench_math(args.math_rounds)


if __name__ == "__main__":
    main()
