"""Warm fork server behind `metaagentx.mas.sandbox` (stdlib only; never imported by the parent).

The parent starts it as a script without site-packages and without the parent's environment:

    python -I -S -B _sandbox_server.py <socket fd> <folder holding the metaagentx package> <0|1>

At start (last argument 1, running as root) it enters private namespaces (`_sandbox_ns.py`),
preloads the stdlib modules jobs use, freezes the GC and reports readiness.

A job is one SEQPACKET message carrying file descriptors (SCM_RIGHTS): spec memfd (JSON: code,
timeout_s, memory_mb, nproc, fsize_mb), control socket, stdin (read-only memfd), stdout pipe,
stderr pipe and optionally the message channel socket. For each job the server makes a working
directory, enters a fresh PID namespace for its next child and forks the job, which becomes
PID 1 there: when it exits or is killed the kernel kills everything it started. The job sets
its rlimits, drops to a per-job unprivileged uid/gid, sets no_new_privs and runs the code. One
poll loop supervises all jobs: it enforces each wall-clock timeout, kills on request or when
the parent goes away (control socket readable), removes the working directory and writes b"s"
at start and one JSON status line at the end to the control socket.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import json
import math
import os
import resource
import select
import shutil
import signal
import socket
import sys
import time
import traceback

PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS = 1, 38
UID_POOL = 1024  # distinct uids per server: concurrent jobs never share one
PRELOAD = (
    "json",
    "re",
    "math",
    "cmath",
    "collections",
    "collections.abc",
    "itertools",
    "functools",
    "heapq",
    "bisect",
    "random",
    "string",
    "typing",
    "io",
    "types",
    "traceback",
    "linecache",
    "fractions",
    "decimal",
    "statistics",
    "copy",
    "operator",
    "dataclasses",
    "enum",
    "textwrap",
    "threading",
    "atexit",
)

_libc = ctypes.CDLL(None, use_errno=True)
_libc.setns.argtypes = [ctypes.c_int, ctypes.c_int]
_libc.unshare.argtypes = [ctypes.c_int]
_libc.prctl.argtypes = [
    ctypes.c_int,
    ctypes.c_ulong,
    ctypes.c_ulong,
    ctypes.c_ulong,
    ctypes.c_ulong,
]
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _sandbox_ns import CLONE_NEWPID, enter_namespaces  # noqa: E402

del sys.path[0]  # jobs must not see the folder of this script


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _recv_job(sock: socket.socket) -> list[int] | None:
    msg, anc, _flags, _addr = sock.recvmsg(64, socket.CMSG_SPACE(16 * 4))
    fds: list[int] = []
    for level, kind, data in anc:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            usable = len(data) - len(data) % 4
            fds.extend(int.from_bytes(data[i : i + 4], sys.byteorder) for i in range(0, usable, 4))
    if not msg:
        for fd in fds:
            os.close(fd)
        return None
    return fds


def _set_limits(spec: dict, isolated: bool) -> None:
    mem = int(spec["memory_mb"]) << 20
    resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
    cpu = int(math.ceil(float(spec["timeout_s"]))) + 1
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    fsize = int(spec["fsize_mb"]) << 20
    resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
    if isolated:
        nproc = int(spec["nproc"])
        resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))


def _setup_job(fds: list[int], uid: int, workdir: str, spec: dict, isolated: bool) -> None:
    os.setsid()
    high = [os.dup(fd) for fd in fds]
    for target, fd in enumerate(high):
        os.dup2(fd, target)
    os.closerange(len(high), 1 << 20)
    os.chdir(workdir)
    os.umask(0o077)
    _set_limits(spec, isolated)
    if isolated:
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(NO_NEW_PRIVS)")
    _check(_libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl(PDEATHSIG)")
    os.environ.clear()
    os.environ.update(
        {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": workdir,
            "TMPDIR": workdir,
            "LANG": "C.UTF-8",
            "PYTHONDONTWRITEBYTECODE": "1",
        }
    )
    if len(fds) > 3:
        os.environ["METAAGENTX_CHANNEL_FD"] = "3"
    sys.dont_write_bytecode = True
    inp = {"encoding": "utf-8", "errors": "replace", "closefd": False}
    sys.stdin = sys.__stdin__ = open(0, **inp)  # noqa: SIM115
    out = {"encoding": "utf-8", "errors": "backslashreplace", "closefd": False}
    sys.stdout = sys.__stdout__ = open(1, "w", **out)  # noqa: SIM115
    sys.stderr = sys.__stderr__ = open(2, "w", buffering=1, **out)  # noqa: SIM115


def _exit_code(exc: SystemExit) -> int:
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code & 0xFF
    print(exc.code, file=sys.stderr)
    return 1


def _run_code(code: str) -> int:
    import atexit
    import linecache
    import threading
    import types

    linecache.cache["<sandbox>"] = (len(code), None, code.splitlines(True), "<sandbox>")
    main = types.ModuleType("__main__")
    sys.modules["__main__"] = main
    sys.argv = ["-c"]  # as for `python -c`
    try:
        exec(compile(code, "<sandbox>", "exec"), main.__dict__)
        rc = 0
    except SystemExit as exc:
        rc = _exit_code(exc)
    except BaseException as exc:
        traceback.print_exception(type(exc), exc, exc.__traceback__.tb_next)
        rc = 1
    with contextlib.suppress(BaseException):  # as at interpreter exit: join non-daemon threads
        threading._shutdown()
    with contextlib.suppress(BaseException):
        atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(BaseException):
            stream.flush()
    return rc


def _kill(pid: int, isolated: bool) -> None:
    # Isolated: the job is PID 1 of its own namespace, so the kernel kills everything in it.
    for kill in (os.kill,) if isolated else (os.kill, os.killpg):
        with contextlib.suppress(ProcessLookupError):
            kill(pid, signal.SIGKILL)


class _Job:
    """One running job as the server sees it."""

    def __init__(
        self, pid: int, pidfd: int, ctl: socket.socket, timeout_s: float, workdir: str, slot: int
    ) -> None:
        self.pid, self.pidfd, self.ctl, self.workdir, self.slot = pid, pidfd, ctl, workdir, slot
        self.deadline = time.monotonic() + timeout_s
        self.timed_out = self.killed = False


class Server:
    """Forks one job per request and supervises all of them from one poll loop."""

    def __init__(self, sock: socket.socket, workroot: str, isolated: bool) -> None:
        self.sock, self.workroot, self.isolated = sock, workroot, isolated
        self.uid_base = 1_000_000 + (os.getpid() % 4000) * UID_POOL
        self.free = list(range(UID_POOL))
        self.by_pidfd: dict[int, _Job] = {}
        self.by_ctl: dict[int, _Job] = {}
        self.poller = select.poll()
        self.poller.register(sock.fileno(), select.POLLIN)
        self.own_pidns = os.open("/proc/self/ns/pid", os.O_RDONLY) if isolated else -1
        self.counter = 0

    def loop(self) -> None:
        while True:
            now = time.monotonic()
            for job in list(self.by_pidfd.values()):
                if not job.killed and job.deadline <= now:
                    job.timed_out = True
                    self._kill(job)
            waits = [j.deadline - now for j in self.by_pidfd.values() if not j.killed]
            timeout_ms = int(math.ceil(min(waits) * 1000)) + 1 if waits else 1000
            for fd, _events in self.poller.poll(timeout_ms):
                if fd == self.sock.fileno():
                    fds = _recv_job(self.sock)
                    if fds is None:
                        return
                    if len(fds) < 5:
                        _close_all(fds)
                        continue
                    try:
                        self._start(fds)
                    except Exception as exc:  # report this job's failure; keep serving others
                        traceback.print_exc()
                        ctl = socket.socket(fileno=fds[1])
                        _send(
                            ctl,
                            json.dumps({"error": f"{type(exc).__name__}: {exc}"}).encode() + b"\n",
                        )
                        ctl.close()
                        _close_all([fds[0], *fds[2:]])
                elif fd in self.by_pidfd:
                    self._finish(self.by_pidfd.pop(fd))
                elif fd in self.by_ctl:  # kill request, or the parent went away
                    self._kill(self.by_ctl[fd])

    def _kill(self, job: _Job) -> None:
        job.killed = True
        _kill(job.pid, self.isolated)
        if self.by_ctl.pop(job.ctl.fileno(), None) is not None:
            self.poller.unregister(job.ctl.fileno())

    def _start(self, fds: list[int]) -> None:
        spec_fd, ctl_fd, job_fds = fds[0], fds[1], fds[2:]
        spec = json.loads(os.pread(spec_fd, os.fstat(spec_fd).st_size, 0))
        timeout_s = float(spec["timeout_s"])
        ctl = socket.socket(fileno=ctl_fd)
        slot = self.free.pop() if self.free else self.counter % UID_POOL
        uid = self.uid_base + slot
        self.counter += 1
        workdir = os.path.join(self.workroot, f"job-{self.counter}")
        try:
            os.mkdir(workdir, 0o700)
            if self.isolated:
                os.chown(workdir, uid, uid)
                _check(_libc.setns(self.own_pidns, CLONE_NEWPID), "setns(pid)")
                _check(_libc.unshare(CLONE_NEWPID), "unshare(CLONE_NEWPID)")
            pid = os.fork()
            if pid == 0:
                _job_main(job_fds, uid, workdir, spec, self.isolated)
            job = _Job(pid, os.pidfd_open(pid), ctl, timeout_s, workdir, slot)
        except BaseException:
            ctl.detach()  # the caller reports the failure on it, then closes it
            self.free.append(slot)
            shutil.rmtree(workdir, ignore_errors=True)
            raise
        for fd in (spec_fd, *job_fds):
            os.close(fd)
        self.by_pidfd[job.pidfd] = job
        self.by_ctl[ctl.fileno()] = job
        self.poller.register(job.pidfd, select.POLLIN)
        self.poller.register(ctl.fileno(), select.POLLIN)
        _send(ctl, b"s")

    def _finish(self, job: _Job) -> None:
        self.poller.unregister(job.pidfd)
        _, status = os.waitpid(job.pid, 0)
        os.close(job.pidfd)
        if not self.isolated:
            _kill(job.pid, False)  # leftovers in the job's process group
        try:
            os.rmdir(job.workdir)  # the common case: the job left nothing behind
        except OSError:
            shutil.rmtree(job.workdir, ignore_errors=True)
        if self.by_ctl.pop(job.ctl.fileno(), None) is not None:
            self.poller.unregister(job.ctl.fileno())
        msg = {
            "exit_code": os.waitstatus_to_exitcode(status),
            "timed_out": job.timed_out,
            "killed": job.killed,
        }
        _send(job.ctl, json.dumps(msg).encode() + b"\n")
        job.ctl.close()
        self.free.append(job.slot)


def _close_all(fds: list[int]) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


def _send(sock: socket.socket, data: bytes) -> None:
    with contextlib.suppress(OSError):  # the parent is gone: nothing to report to
        sock.send(data, socket.MSG_DONTWAIT)


def _job_main(fds: list[int], uid: int, workdir: str, spec: dict, isolated: bool) -> None:
    rc = 71
    try:
        _setup_job(fds, uid, workdir, spec, isolated)
        rc = _run_code(spec["code"])
    except BaseException:
        traceback.print_exc()
    os._exit(rc)


def _preload(pkg_dir: str) -> None:
    import importlib

    sys.path.append(pkg_dir)
    for name in (*PRELOAD, "metaagentx.mas.channel"):
        with contextlib.suppress(Exception):
            importlib.import_module(name)


def serve(sock: socket.socket, pkg_root: str, want_isolation: bool) -> None:
    """Set up, report readiness on `sock`, then run jobs until the parent closes the socket."""
    signal.pthread_sigmask(signal.SIG_SETMASK, [])  # jobs start with no signal blocked
    info: dict = {"pid": os.getpid(), "isolated": False, "reason": ""}
    if not want_isolation:
        info["reason"] = "isolation turned off by the caller"
    elif os.geteuid() != 0:
        info["reason"] = "not running as root"
    else:
        try:
            enter_namespaces(
                [
                    sys.base_prefix,
                    sys.base_exec_prefix,
                    sys.prefix,
                    *sys.path,
                    os.path.realpath(sys.executable),
                    pkg_root,
                ]
            )
            info["isolated"] = True
        except OSError as exc:
            info["reason"] = f"namespace setup failed: {exc}"
    isolated = info["isolated"]
    if isolated:
        workroot = "/tmp"
    else:
        import tempfile

        workroot = tempfile.mkdtemp(prefix="metaagentx-sandbox-")
    pkg_dir = os.path.join(workroot, ".pkg")
    os.mkdir(pkg_dir, 0o755)
    os.symlink(os.path.join(pkg_root, "metaagentx"), os.path.join(pkg_dir, "metaagentx"))
    _preload(pkg_dir)
    gc.freeze()  # jobs' garbage collections then skip (and do not copy) the server's objects
    os.chdir("/")
    sock.sendall(json.dumps(info).encode())
    try:
        Server(sock, workroot, isolated).loop()
    finally:
        if not isolated:
            shutil.rmtree(workroot, ignore_errors=True)


if __name__ == "__main__":
    serve(socket.socket(fileno=int(sys.argv[1])), sys.argv[2], sys.argv[3] == "1")
