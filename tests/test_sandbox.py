"""Functional tests for metaagentx.mas.sandbox: I/O, exit codes, the message channel,
concurrency, server restart, and the degraded mode without namespaces."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
import warnings
from pathlib import Path

import pytest

from metaagentx.mas.sandbox import (
    Sandbox,
    SandboxResult,
    default_sandbox,
    run_interactive,
    run_untrusted,
    run_untrusted_async,
)

pytestmark = pytest.mark.timeout(120)


def test_stdout_stderr_and_exit_code():
    res = run_untrusted(
        "import sys\nprint('out', 6 * 7)\nprint('err', file=sys.stderr)\nsys.exit(3)",
        timeout_s=10,
        memory_mb=256,
    )
    assert res == SandboxResult("out 42\n", "err\n", 3, False, None, res.wall_s)


def test_stdin_is_readable_line_by_line_and_whole():
    code = (
        "a, b = map(int, input().split())\nrest = __import__('sys').stdin.read()\n"
        "print(a + b, len(rest))"
    )
    res = run_untrusted(code, timeout_s=10, memory_mb=256, stdin="3 4\n" + "z" * 300_000)
    assert res.stdout == "7 300000\n"


def test_exception_gives_exit_1_and_a_traceback_with_the_line():
    res = run_untrusted("x = 1\ny = x / 0\n", timeout_s=10, memory_mb=256)
    assert res.exit_code == 1 and res.killed_reason is None
    assert 'File "<sandbox>", line 2' in res.stderr and "y = x / 0" in res.stderr
    assert res.stderr.rstrip().endswith("ZeroDivisionError: division by zero")


def test_syntax_error_and_sys_exit_with_message():
    bad = run_untrusted("def f(:\n", timeout_s=10, memory_mb=256)
    assert bad.exit_code == 1 and "SyntaxError" in bad.stderr
    msg = run_untrusted("raise SystemExit('bye')", timeout_s=10, memory_mb=256)
    assert (msg.exit_code, msg.stderr) == (1, "bye\n")


def test_unicode_round_trip():
    res = run_untrusted("print(input()[::-1])", timeout_s=10, memory_mb=256, stdin="héllo ✓\n")
    assert res.stdout == "✓ olléh\n"


def test_child_sees_the_package_and_the_stdlib_but_not_site_packages():
    code = """
import fractions, sqlite3
import metaagentx.mas.channel
try:
    import torch
    print('torch')
except ImportError:
    print('no torch')
print(fractions.Fraction(1, 3) + fractions.Fraction(1, 6))
"""
    res = run_untrusted(code, timeout_s=10, memory_mb=256)
    assert res.stdout == "no torch\n1/2\n", res.stderr


def test_killed_by_a_signal_reports_it():
    res = run_untrusted("import ctypes\nctypes.string_at(0)", timeout_s=10, memory_mb=256)
    assert res.exit_code == -signal.SIGSEGV
    assert res.killed_reason == "signal:SIGSEGV"


def test_threads_run_jobs_concurrently_and_get_their_own_results():
    results: dict[int, SandboxResult] = {}

    def work(i: int) -> None:
        results[i] = run_untrusted(
            f"import time\ntime.sleep(0.05)\nprint({i} * {i})", timeout_s=30, memory_mb=256
        )

    threads = [threading.Thread(target=work, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert {i: r.stdout for i, r in results.items()} == {i: f"{i * i}\n" for i in range(16)}


def test_run_untrusted_works_inside_a_running_event_loop():
    async def main() -> tuple[str, str]:
        sync = run_untrusted("print('sync')", timeout_s=10, memory_mb=256)
        done = await run_untrusted_async("print('async')", timeout_s=10, memory_mb=256)
        return sync.stdout, done.stdout

    assert asyncio.run(main()) == ("sync\n", "async\n")


ECHO_CLIENT = """
from metaagentx.mas.channel import request
total = 0
for step in range(4):
    reply = request({"session": SESSION, "step": step})
    assert reply["session"] == SESSION, reply
    total += reply["value"]
print(SESSION, total)
"""


def test_run_interactive_serves_many_concurrent_sessions():
    seen: list[tuple[int, int]] = []
    in_flight = peak = 0

    async def handler(obj: dict) -> dict:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.05)
        in_flight -= 1
        seen.append((obj["session"], obj["step"]))
        return {"session": obj["session"], "value": obj["session"] * 10 + obj["step"]}

    async def main() -> list[SandboxResult]:
        return await asyncio.gather(
            *[
                run_interactive(
                    ECHO_CLIENT.replace("SESSION", str(i)),
                    timeout_s=60,
                    memory_mb=256,
                    handler=handler,
                )
                for i in range(40)
            ]
        )

    results = asyncio.run(main())
    for i, res in enumerate(results):
        assert res.exit_code == 0, res.stderr
        assert res.stdout == f"{i} {i * 40 + 6}\n"  # sum over steps of 10*i + step
    assert sorted(seen) == [(i, s) for i in range(40) for s in range(4)]
    assert peak > 1  # requests from different sessions were pending together


def test_handler_error_kills_the_child_and_is_raised():
    async def handler(obj: dict) -> dict:
        raise KeyError("no such agent")

    code = (
        "from metaagentx.mas.channel import request\nrequest({'a': 1})\nimport time\ntime.sleep(30)"
    )
    with pytest.raises(KeyError, match="no such agent"):
        asyncio.run(run_interactive(code, timeout_s=60, memory_mb=256, handler=handler))


def test_garbage_on_the_channel_kills_the_child():
    async def handler(obj: dict) -> dict:
        return {}

    code = (
        "import os\nos.write(int(os.environ['METAAGENTX_CHANNEL_FD']), b'[1, 2\\n')\n"
        "import time\ntime.sleep(30)"
    )
    res = asyncio.run(run_interactive(code, timeout_s=60, memory_mb=256, handler=handler))
    assert res.killed_reason == "channel_protocol"
    assert res.exit_code == -9 and not res.timed_out


def test_request_without_a_channel_fails_clearly():
    res = run_untrusted(
        "from metaagentx.mas.channel import request\nrequest({})", timeout_s=10, memory_mb=256
    )
    assert "METAAGENTX_CHANNEL_FD is not set" in res.stderr


def test_dead_server_is_restarted():
    box = default_sandbox()
    first = box.isolation().server_pid
    os.kill(first, signal.SIGKILL)
    res = run_untrusted("print('again')", timeout_s=10, memory_mb=256)
    assert res.stdout == "again\n"
    assert box.isolation().server_pid != first


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="timeout_s"):
        run_untrusted("pass", timeout_s=0, memory_mb=256)
    with pytest.raises(ValueError, match="memory_mb"):
        run_untrusted("pass", timeout_s=1, memory_mb=1)


def test_degraded_mode_still_runs_and_warns_what_is_lost():
    import tempfile

    temp_dirs = set(Path(tempfile.gettempdir()).glob("metaagentx-sandbox-*"))
    box = Sandbox(isolate=False)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            info = box.isolation()
        assert not info.namespaces and "turned off" in info.reason
        assert any("network isolation" in str(w.message) for w in caught)
        ok = box.run_sync("print(input())", timeout_s=10, memory_mb=256, stdin="hi\n")
        loop = box.run_sync("while True: pass", timeout_s=0.5, memory_mb=256)
    finally:
        box.close()
    assert set(Path(tempfile.gettempdir()).glob("metaagentx-sandbox-*")) == temp_dirs
    assert ok.stdout == "hi\n" and ok.exit_code == 0
    assert loop.timed_out and loop.killed_reason == "timeout"


def test_a_job_the_server_cannot_start_fails_loudly_and_the_server_keeps_serving():
    from metaagentx.mas._sandbox_driver import Job, SandboxError, drive

    box = default_sandbox()
    server = box.isolation().server_pid
    job = Job({"code": "print(1)"}, "", interactive=False)  # no timeout_s: a bad spec
    try:
        box._submit(job.child_fds)
        job.close_child_side()
        with pytest.raises(SandboxError, match="could not start the job: KeyError"):
            asyncio.run(drive(job, None, 5.0, 1000, True))
    finally:
        job.close_child_side()
        job.close()
    assert run_untrusted("print(2)", timeout_s=10, memory_mb=256).stdout == "2\n"
    assert box.isolation().server_pid == server


class _Interrupt(Exception):
    pass


def test_an_interrupted_sync_call_kills_its_job_and_leaves_the_api_usable():
    box = default_sandbox()
    server = box.isolation().server_pid
    children = Path(f"/proc/{server}/task/{server}/children")

    def interrupt(signum, frame):
        raise _Interrupt()

    previous = signal.signal(signal.SIGUSR1, interrupt)
    timer = threading.Timer(
        0.5, signal.pthread_kill, (threading.main_thread().ident, signal.SIGUSR1)
    )
    timer.start()
    try:
        with pytest.raises(_Interrupt):
            run_untrusted("import time\ntime.sleep(60)", timeout_s=60, memory_mb=256)
    finally:
        timer.cancel()
        signal.signal(signal.SIGUSR1, previous)
    for _ in range(200):  # the server reaps the killed job
        if not children.read_text().split():
            break
        time.sleep(0.05)
    assert children.read_text().split() == []
    assert run_untrusted("print('next')", timeout_s=10, memory_mb=256).stdout == "next\n"


def test_non_daemon_threads_finish_before_the_job_ends_as_in_python():
    code = (
        "import threading, time\n"
        "def late():\n    time.sleep(0.2)\n    print('late')\n"
        "threading.Thread(target=late).start()\nprint('main')"
    )
    res = run_untrusted(code, timeout_s=10, memory_mb=256)
    assert res.stdout == "main\nlate\n"


def test_alarm_handlers_work_in_the_job():
    code = """
import signal, time
class Alarm(Exception):
    pass
def ring(*_):
    raise Alarm()
signal.signal(signal.SIGALRM, ring)
signal.setitimer(signal.ITIMER_REAL, 0.2)
try:
    time.sleep(20)
except Alarm:
    print('alarm')
"""
    assert run_untrusted(code, timeout_s=30, memory_mb=256).stdout == "alarm\n"
