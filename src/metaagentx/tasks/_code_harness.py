"""Test harness that runs INSIDE the sandbox: one program, all its tests, one JSON report.

``metaagentx.tasks.code`` sends this file's source as the sandboxed code and the job as stdin:
``{"program": str, "tests": {...}, "timeout_s": float, "parallel": int, "max_output": int}``.

The harness compiles the program once and forks worker children (at most ``parallel`` at a
time). A worker runs a batch of tests one after another; for each test it executes the
program afresh in a new namespace (so globals, ``sys.exit`` and ``lru_cache`` state do not
carry over), with fd 0 switched to that test's input (an in-memory file) and fd 1 to that
test's own in-memory output file, whose size is capped with RLIMIT_FSIZE (``max_output`` or
twice the expected output; more is "output over"). stderr is discarded. The worker announces
each test on a pipe before running it, so the harness enforces the wall-clock limit per test
(and a CPU rlimit backs it up): a test past ``timeout_s`` gets its worker killed, and the
rest of the batch continues in a new worker. A worker that dies inside a test (segfault,
``os._exit``), or leaves threads running, is replaced the same way. The report is one line on
stdout: ``MAX_HARNESS_RESULT {"results": [{"status": pass|wrong|error|timeout, "detail"}]}``.
Stdlib only; never imported by the package at run time.
"""

import builtins
import json
import math
import os
import resource
import select
import signal
import sys
import threading
import time
import traceback

MARK = "MAX_HARNESS_RESULT "
MAX_BATCH = 32  # tests per worker (bounds the open in-memory files)
PRELUDE = (
    "from typing import *\nfrom collections import *\nfrom itertools import *\n"
    "from functools import *\nfrom heapq import *\nfrom bisect import *\nfrom string import *\n"
    "from operator import *\nfrom math import *\n"
    "import math, heapq, bisect, collections, itertools, functools, operator, string, re, sys\n"
    "inf = float('inf')\n"
    "for _m in ('random', 'datetime', 'queue', 'statistics', 'fractions', 'decimal'):\n"
    "    try:\n        globals()[_m] = __import__(_m)\n    except ImportError:\n        pass\n"
)
_BASE = None  # the prelude's namespace, made once in the harness and copied for each test


def _namespace(fn_name):
    global _BASE
    ns = {"__name__": "__main__" if fn_name is None else "__solution__"}
    ns["__builtins__"] = builtins
    if fn_name is not None:
        if _BASE is None:
            _BASE = {"__builtins__": builtins}
            exec(PRELUDE, _BASE)
        ns = {**_BASE, **ns}
    return ns


def _exit(code=None):
    raise SystemExit(code)


# ----------------------------------------------------------------------------- worker side


def _limits(job, cap):
    used = resource.getrusage(resource.RUSAGE_SELF)
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    cpu = math.ceil(used.ru_utime + used.ru_stime + job["timeout_s"]) + 1
    if hard != resource.RLIM_INFINITY:
        cpu = min(cpu, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, hard))
    _, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    size = cap + 1 if hard == resource.RLIM_INFINITY else min(cap + 1, hard)
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, hard))


def _run_test(code, job, i, in_fd, out_fd):
    """Run test ``i`` in this worker; return the report {"result": ...} or {"error": str}."""
    tests = job["tests"]
    fn_name = tests.get("fn_name")
    os.dup2(in_fd, 0)
    os.dup2(out_fd, 1)
    sys.stdin = sys.__stdin__ = open(0, closefd=False)  # noqa: SIM115
    sys.stdout = sys.__stdout__ = open(1, "w", closefd=False)  # noqa: SIM115
    _limits(job, _cap(job, i))
    report = {}
    try:
        ns = _namespace(fn_name)
        exec(code, ns)
        if fn_name is None:
            for t in threading.enumerate():
                if t is not threading.main_thread() and not t.daemon:
                    t.join()
        else:
            sol = ns.get("Solution")
            fn = getattr(sol(), fn_name) if sol is not None and hasattr(sol, fn_name) else None
            if fn is None and ns.get(fn_name) is not (_BASE or {}).get(fn_name, ns):
                fn = ns.get(fn_name)  # defined by the program, not a prelude name
            if not callable(fn):
                raise NameError(f"no function or Solution method named {fn_name!r}")
            report["result"] = fn(*tests["inputs"][i])
    except SystemExit as exc:
        if fn_name is not None or exc.code not in (None, 0):
            report["error"] = f"SystemExit({exc.code!r})"
    except BaseException as exc:  # noqa: BLE001 - the program's failure is the result
        tail = traceback.format_exception_only(type(exc), exc)[-1].strip()
        report["error"] = tail[:300]
    try:
        sys.stdout.flush()
    except BaseException as exc:  # noqa: BLE001 - e.g. output over the size cap
        report.setdefault("error", f"{type(exc).__name__}: {exc}"[:300])
    return report


def _send(fd, text):
    data = text.encode()
    while data:
        data = data[os.write(fd, data) :]


def _worker(code, job, batch, files, res_fd):
    """Child: run the batch's tests in order; 'S i' before each, 'R i {report}' after."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # over the cap: writes fail instead
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    for i in batch:
        _send(res_fd, f"S {i}\n")
        report = _run_test(code, job, i, *files[i])
        _send(res_fd, f"R {i} {json.dumps(report, default=repr)}\n")
        if threading.active_count() > 1:  # threads left running would leak into the next test
            break
    os._exit(0)


# ----------------------------------------------------------------------------- harness side


def _cap(job, i):
    tests = job["tests"]
    if "fn_name" in tests:
        return job["max_output"]
    return max(job["max_output"], 2 * len(tests["outputs"][i].encode()))


def _memfile(data=b""):
    fd = os.memfd_create("t") if hasattr(os, "memfd_create") else _tmpfile()
    os.write(fd, data)
    os.lseek(fd, 0, 0)
    return fd


def _tmpfile():
    import tempfile

    fd, path = tempfile.mkstemp()
    os.unlink(path)
    return fd


def _start(code, job, batch):
    tests = job["tests"]
    call = "fn_name" in tests
    devnull = os.open(os.devnull, os.O_RDWR)
    files = {}
    for i in batch:
        in_fd = devnull if call else _memfile(tests["inputs"][i].encode())
        files[i] = (in_fd, devnull if call else _memfile())
    res_r, res_w = os.pipe()
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:
        try:
            os.dup2(devnull, 2)
            os.close(res_r)
            _worker(code, job, batch, files, res_w)
        finally:
            os._exit(1)
    os.close(res_w)
    os.set_blocking(res_r, False)
    return {
        "pid": pid,
        "pidfd": os.pidfd_open(pid),
        "res": res_r,
        "buf": b"",
        "batch": batch,
        "files": files,
        "devnull": devnull,
        "current": None,
        "deadline": None,
        "done": set(),
    }


def _same(got, want):
    if isinstance(want, bool) or isinstance(got, bool):
        return type(got) is type(want) and got == want
    if isinstance(want, float) or isinstance(got, float):
        if isinstance(got, (int, float)) and isinstance(want, (int, float)):
            return abs(got - want) <= 1e-6 * max(1.0, abs(want))
        return False
    if isinstance(want, list) and isinstance(got, list):
        return len(got) == len(want) and all(_same(g, w) for g, w in zip(got, want))
    if isinstance(want, dict) and isinstance(got, dict):
        return got.keys() == want.keys() and all(_same(got[k], want[k]) for k in want)
    return got == want


def _lines(text):
    lines = [line.rstrip() for line in text.split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def _short(value):
    text = value if isinstance(value, str) else json.dumps(value, default=repr)
    return text if len(text) <= 120 else text[:117] + "..."


def _judge(job, run, i, report, exit_status=None):
    """Status of test ``i`` from its report (None if the worker died inside it)."""
    tests = job["tests"]
    call = "fn_name" in tests
    out_fd = run["files"][i][1]
    cap = _cap(job, i)
    if not call and os.fstat(out_fd).st_size > cap:
        return {"status": "wrong", "detail": f"output over {cap} bytes"}
    if report is None:
        if os.WIFSIGNALED(exit_status):
            sig = os.WTERMSIG(exit_status)
            if sig == signal.SIGXCPU:
                return {"status": "timeout", "detail": "CPU time limit"}
            return {"status": "error", "detail": f"killed by signal {sig}"}
        if os.WEXITSTATUS(exit_status) != 0 or call:
            return {"status": "error", "detail": f"exited ({os.WEXITSTATUS(exit_status)})"}
        report = {}  # the program ended the process itself (os._exit(0)): judge its output
    if "error" in report:
        return {"status": "error", "detail": report["error"]}
    if call:
        want = tests["outputs"][i]
        got = json.loads(json.dumps(report["result"], default=repr))
        if _same(got, want):
            return {"status": "pass", "detail": ""}
        return {"status": "wrong", "detail": f"expected {_short(want)}, got {_short(got)}"}
    out = os.pread(out_fd, cap + 1, 0).decode("utf-8", "replace")
    want = tests["outputs"][i]
    if _lines(out) == _lines(want):
        return {"status": "pass", "detail": ""}
    return {"status": "wrong", "detail": f"expected {_short(want)!r}, got {_short(out)!r}"}


def _drain(job, run, results):
    """Read the worker's pipe and handle its complete 'S i' / 'R i report' lines."""
    while True:
        try:
            chunk = os.read(run["res"], 1 << 16)
        except BlockingIOError:
            break
        if not chunk:
            break
        run["buf"] += chunk
    *lines, run["buf"] = run["buf"].split(b"\n")
    for line in lines:
        kind, _, rest = line.decode().partition(" ")
        i, _, payload = rest.partition(" ")
        i = int(i)
        if kind == "S":
            run["current"], run["deadline"] = i, time.monotonic() + job["timeout_s"]
        else:
            results[i] = _judge(job, run, i, json.loads(payload))
            run["done"].add(i)
            run["current"] = run["deadline"] = None


def _end(job, run, results, queue, status):
    """The worker exited or was killed: settle its current test, requeue the unstarted."""
    cur = run["current"]
    if cur is not None and cur not in run["done"]:
        if status == "timeout":
            results[cur] = {"status": "timeout", "detail": f"over {job['timeout_s']} s"}
        else:
            results[cur] = _judge(job, run, cur, None, status)
        run["done"].add(cur)
    rest = [i for i in run["batch"] if i not in run["done"]]
    if rest:
        queue.insert(0, rest)
    fds = {run["res"], run["pidfd"], run["devnull"]}
    fds.update(fd for pair in run["files"].values() for fd in pair)
    for fd in fds:
        os.close(fd)


def _pump(job, running, results, queue):
    deadlines = [r["deadline"] for r in running if r["deadline"] is not None]
    wait = max(0.0, min(deadlines) - time.monotonic()) if deadlines else 1.0
    fds = [fd for r in running for fd in (r["res"], r["pidfd"])]
    ready = set(select.select(fds, [], [], wait)[0])
    for run in list(running):
        if run["res"] in ready or run["pidfd"] in ready:
            _drain(job, run, results)
        expired = run["deadline"] is not None and time.monotonic() > run["deadline"]
        if expired or run["pidfd"] in ready:
            if expired:
                os.kill(run["pid"], signal.SIGKILL)
            _, exit_status = os.waitpid(run["pid"], 0)
            if not expired:
                _drain(job, run, results)  # lines written just before it exited
            running.remove(run)
            _end(job, run, results, queue, "timeout" if expired else exit_status)


def main():
    job = json.loads(sys.stdin.read())
    n = len(job["tests"]["inputs"])
    try:
        code = compile(job["program"], "<solution>", "exec")
    except (SyntaxError, ValueError) as exc:
        detail = f"{type(exc).__name__}: {exc}"[:300]
        print(MARK + json.dumps({"results": [{"status": "error", "detail": detail}] * n}))
        return
    _namespace(job["tests"].get("fn_name"))  # prelude once, before forking
    for name in ("exit", "quit"):  # the site module's helpers, absent under python -S
        if not hasattr(builtins, name):
            setattr(builtins, name, _exit)
    lanes = max(1, min(job["parallel"], n))
    size = min(MAX_BATCH, math.ceil(n / lanes))
    queue = [list(range(k, min(n, k + size))) for k in range(0, n, size)]
    results = [None] * n
    running = []
    while queue or running:
        while queue and len(running) < job["parallel"]:
            running.append(_start(code, job, queue.pop(0)))
        _pump(job, running, results, queue)
    print(MARK + json.dumps({"results": results}))


if __name__ == "__main__":
    main()
