"""Benchmark: sandbox launches per second against a plain `python -c` subprocess, in one run.

    .venv/bin/python bench/sandbox.py [--n 200] [--rounds 5]

Both sides run the same trivial program one after another. The baseline is
`subprocess.run([sys.executable, "-c", code])`: a fresh interpreter, no isolation. The sandbox
is `metaagentx.mas.sandbox.run_untrusted` (warm fork server, namespaces, per-job uid, rlimits).
Rounds alternate between the two so that load from other processes hits both alike; the
reported rate is total launches over total time. Prints both rates and the ratio, then the
same with `--concurrency` launches in flight at once (asyncio subprocesses vs
`run_untrusted_async`), the way concurrently running MAS scripts use the sandbox.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import time

from metaagentx.mas.sandbox import default_sandbox, run_untrusted, run_untrusted_async

CODE = "x = sum(range(10))"


def plain(n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        subprocess.run([sys.executable, "-c", CODE], check=True)
    return time.perf_counter() - start


def sandboxed(n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        res = run_untrusted(CODE, timeout_s=10, memory_mb=256)
        if res.exit_code != 0:
            raise RuntimeError(f"sandbox run failed: {res}")
    return time.perf_counter() - start


async def _gather(n: int, width: int, launch) -> float:
    sem = asyncio.Semaphore(width)

    async def one() -> None:
        async with sem:
            await launch()

    start = time.perf_counter()
    await asyncio.gather(*[one() for _ in range(n)])
    return time.perf_counter() - start


async def _plain_async() -> None:
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", CODE)
    if await proc.wait() != 0:
        raise RuntimeError("plain python -c failed")


async def _sandbox_async() -> None:
    res = await run_untrusted_async(CODE, timeout_s=30, memory_mb=256)
    if res.exit_code != 0:
        raise RuntimeError(f"sandbox run failed: {res}")


def _report(label: str, n: int, t_plain: float, t_box: float) -> None:
    rate_plain, rate_box = n / t_plain, n / t_box
    print(
        f"[{label}] plain subprocess `python -c`: {rate_plain:8.1f} launches/s "
        f"({1000 / rate_plain:6.2f} ms each, n={n})"
    )
    print(
        f"[{label}] run_untrusted (sandbox):      {rate_box:8.1f} launches/s "
        f"({1000 / rate_box:6.2f} ms each, n={n})"
    )
    print(f"[{label}] ratio sandbox / plain: {rate_box / rate_plain:.2f}x")


def main() -> int:
    """Run the comparison and print launches/s for each side and their ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200, help="launches per side in total")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds")
    parser.add_argument("--concurrency", type=int, default=16, help="launches in flight")
    args = parser.parse_args()
    info = default_sandbox().isolation()
    print(f"sandbox isolation: namespaces={info.namespaces} {info.reason}".rstrip())
    sandboxed(5)  # warm-up: server start, first-time imports
    plain(2)
    per_round = max(1, args.n // args.rounds)
    t_plain = t_box = 0.0
    for _ in range(args.rounds):
        t_plain += plain(per_round)
        t_box += sandboxed(per_round)
    _report("serial", per_round * args.rounds, t_plain, t_box)
    width = args.concurrency
    t_plain = asyncio.run(_gather(args.n, width, _plain_async))
    t_box = asyncio.run(_gather(args.n, width, _sandbox_async))
    _report(f"{width} in flight", args.n, t_plain, t_box)
    return 0


if __name__ == "__main__":
    sys.exit(main())
