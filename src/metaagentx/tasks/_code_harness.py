"""Test harness that runs INSIDE the sandbox: one program, all its tests, one JSON report.

``metaagentx.tasks.code`` sends this file's source as the sandboxed code and the job as stdin:
``{"program": str, "tests": {...}, "timeout_s": float, "parallel": int, "max_output": int}``.
The harness compiles the program once, then forks one child per test (at most ``parallel`` at
a time), so a test's ``sys.exit``, stdin, globals or crash cannot leak into the next one. Each
child gets its stdin from an in-memory file, its stdout on a pipe read with a byte bound
(``max_output``, or twice the expected output if larger; an over-printing program is
killed), its stderr discarded, a CPU-time rlimit
and a wall-clock deadline enforced by the harness. The report is one line on stdout:
``MAX_HARNESS_RESULT {"results": [{"status": pass|wrong|error|timeout, "detail": str}]}``.
Stdlib only; never imported by the package at run time.
"""

import builtins
import contextlib
import json
import os
import resource
import select
import signal
import sys
import threading
import time
import traceback

MARK = "MAX_HARNESS_RESULT "
PRELUDE = (
    "from typing import *\nfrom collections import *\nfrom itertools import *\n"
    "from functools import *\nfrom heapq import *\nfrom bisect import *\nfrom string import *\n"
    "from operator import *\nfrom math import *\n"
    "import math, heapq, bisect, collections, itertools, functools, operator, string, re, sys\n"
    "inf = float('inf')\n"
    "for _m in ('random', 'datetime', 'queue', 'statistics', 'fractions', 'decimal'):\n"
    "    try:\n        globals()[_m] = __import__(_m)\n    except ImportError:\n        pass\n"
)
_BASE = None  # the prelude's namespace, made once in the harness and copied into each child


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


def _child(code, args, fn_name, res_fd):
    """In the forked child: run the program (and the call), report through ``res_fd``."""
    sys.stdin = sys.__stdin__ = open(0, closefd=False)  # noqa: SIM115
    sys.stdout = sys.__stdout__ = open(1, "w", closefd=False)  # noqa: SIM115
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
            report["result"] = fn(*args)
    except SystemExit as exc:
        if fn_name is not None or exc.code not in (None, 0):
            report["error"] = f"SystemExit({exc.code!r})"
    except BaseException as exc:  # noqa: BLE001 - the program's failure is the result
        tail = traceback.format_exception_only(type(exc), exc)[-1].strip()
        report["error"] = tail[:300]
    with contextlib.suppress(BaseException):  # stdout may be gone (over-printing)
        sys.stdout.flush()
    data = json.dumps(report, default=repr).encode()
    with contextlib.suppress(OSError):
        while data:
            data = data[os.write(res_fd, data) :]
    os._exit(0)


def _memfile():
    if hasattr(os, "memfd_create"):
        return os.memfd_create("stdin")
    import tempfile

    fd, path = tempfile.mkstemp()
    os.unlink(path)
    return fd


def _start(code, job, i):
    tests = job["tests"]
    fn_name = tests.get("fn_name")
    text = "" if fn_name else tests["inputs"][i]
    args = tests["inputs"][i] if fn_name else None
    stdin_fd = _memfile()
    os.write(stdin_fd, text.encode())
    os.lseek(stdin_fd, 0, 0)
    out_r, out_w = os.pipe()
    res_r, res_w = os.pipe()
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:
        try:
            os.dup2(stdin_fd, 0)
            if fn_name:
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, 1)
            else:
                os.dup2(out_w, 1)
            os.dup2(os.open(os.devnull, os.O_WRONLY), 2)
            os.dup2(res_w, 3)
            os.closerange(4, 1024)
            _, hard = resource.getrlimit(resource.RLIMIT_CPU)
            cpu = int(job["timeout_s"]) + 2
            if hard != resource.RLIM_INFINITY:
                cpu = min(cpu, hard)
            resource.setrlimit(resource.RLIMIT_CPU, (cpu, hard))
            signal.signal(signal.SIGPIPE, signal.SIG_DFL)
            _child(code, args, fn_name, 3)
        finally:
            os._exit(1)
    for fd in (stdin_fd, out_w, res_w):
        os.close(fd)
    return {
        "i": i,
        "pid": pid,
        "bufs": {out_r: bytearray(), res_r: bytearray()},
        "open": [out_r, res_r],
        "out": out_r,
        "res": res_r,
        "deadline": time.monotonic() + job["timeout_s"],
        "over": False,
        "cap": max(job["max_output"], 2 * len(tests["outputs"][i]) if not fn_name else 0),
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


def _judge(job, run):
    """The status of one finished child: pass | wrong | error | timeout, with a short detail."""
    tests, i = job["tests"], run["i"]
    if run["timed_out"]:
        return {"status": "timeout", "detail": f"over {job['timeout_s']} s"}
    if run["over"]:
        return {"status": "wrong", "detail": f"output over {run['cap']} bytes"}
    try:
        report = json.loads(bytes(run["bufs"][run["res"]]) or b"{}")
    except ValueError:
        report = {}
    if "error" in report:
        return {"status": "error", "detail": report["error"]}
    code = run["exit"]
    if os.WIFSIGNALED(code):
        sig = os.WTERMSIG(code)
        if sig == signal.SIGXCPU:
            return {"status": "timeout", "detail": "CPU time limit"}
        return {"status": "error", "detail": f"killed by signal {sig}"}
    if "fn_name" in tests:
        if "result" not in report:
            return {"status": "error", "detail": "no result (process exited early)"}
        want = tests["outputs"][i]
        got = json.loads(json.dumps(report["result"], default=repr))
        if _same(got, want):
            return {"status": "pass", "detail": ""}
        return {"status": "wrong", "detail": f"expected {_short(want)}, got {_short(got)}"}
    out = bytes(run["bufs"][run["out"]]).decode("utf-8", "replace")
    want = tests["outputs"][i]
    if _lines(out) == _lines(want):
        return {"status": "pass", "detail": ""}
    return {"status": "wrong", "detail": f"expected {_short(want)!r}, got {_short(out)!r}"}


def _read_ready(job, running, wait):
    fds = [fd for r in running for fd in r["open"]]
    if any(not r["open"] for r in running):
        wait = min(wait, 0.002)  # someone closed its pipes: poll for its exit soon
    ready = set(select.select(fds, [], [], wait)[0]) if fds else set()
    if not fds:
        time.sleep(wait)
    for run in running:
        for fd in [fd for fd in run["open"] if fd in ready]:
            chunk = os.read(fd, 65536)
            if not chunk:
                run["open"].remove(fd)
                continue
            run["bufs"][fd] += chunk
            if fd == run["out"] and len(run["bufs"][fd]) > run["cap"]:
                run["over"] = True


def _pump(job, running, results):
    """Read what is ready; finish children that exited, over-printed or ran past the deadline."""
    _read_ready(job, running, max(0.0, min(r["deadline"] for r in running) - time.monotonic()))
    for run in list(running):
        run["timed_out"] = time.monotonic() > run["deadline"]
        if run["over"] or run["timed_out"]:
            os.kill(run["pid"], signal.SIGKILL)
            _, run["exit"] = os.waitpid(run["pid"], 0)
        elif not run["open"]:
            pid, run["exit"] = os.waitpid(run["pid"], os.WNOHANG)
            if pid == 0:
                continue
        else:
            continue
        running.remove(run)
        for fd in run["bufs"]:
            os.close(fd)
        results[run["i"]] = _judge(job, run)


def main():
    job = json.loads(sys.stdin.read())
    n = len(job["tests"]["inputs"])
    try:
        code = compile(job["program"], "<solution>", "exec")
    except (SyntaxError, ValueError) as exc:
        detail = f"{type(exc).__name__}: {exc}"[:300]
        results = [{"status": "error", "detail": detail} for _ in range(n)]
        print(MARK + json.dumps({"results": results}))
        return
    results = [None] * n
    _namespace(job["tests"].get("fn_name"))  # prelude once, before forking
    pending = list(range(n))
    running = []
    while pending or running:
        while pending and len(running) < job["parallel"]:
            running.append(_start(code, job, pending.pop(0)))
        _pump(job, running, results)
    print(MARK + json.dumps({"results": results}))


if __name__ == "__main__":
    main()
