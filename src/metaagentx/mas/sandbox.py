"""Run untrusted Python (designer scripts, generated programs) in an isolated child process.

Entry points: `run_untrusted` (sync, thread-safe), `run_untrusted_async`, `run_interactive`
(the child calls `metaagentx.mas.channel.request(dict) -> dict`; the parent answers with
`await handler(dict)`). Try it:

    python -c "from metaagentx.mas.sandbox import run_untrusted as r; \\
               print(r('print(6 * 7)', timeout_s=5, memory_mb=256))"

How: a warm fork server (`_sandbox_server.py`, a stdlib-only Python without site-packages,
started with `subprocess`, so the parent itself is never forked) receives each job's file
descriptors over a Unix socket and forks the job; one poll loop in the server supervises all
jobs. Launching costs a fork and a few syscalls instead of a new interpreter. A dead server is
restarted on the next job. The child sees the stdlib and the `metaagentx` package only
(stdlib-only modules such as `metaagentx.mas.api` and `metaagentx.mas.channel` import; `torch`
does not). stdin is a read-only in-memory file; stdout/stderr are pipes.

What is isolated (root with Linux namespaces; each property has a test in
tests/test_sandbox_adversarial.py):
- Network: the server lives in its own network namespace with no interface up; connecting
  to anything, including the host's loopback, fails.
- Memory: RLIMIT_AS = memory_mb (allocations fail with MemoryError); the forked interpreter's
  own ~20 MB of address space counts towards it.
- CPU time: RLIMIT_CPU = ceil(timeout_s) + 1 s per process (then SIGKILL).
- Process count: each job runs under its own unprivileged uid/gid (no two running jobs share
  one) with RLIMIT_NPROC = `nproc` (default 64), so a fork bomb stops there.
- File size: RLIMIT_FSIZE = 64 MB per file; RLIMIT_NOFILE = 256; no core dumps.
- Output: stdout and stderr are each read up to `max_output_bytes`; on more the job is killed
  (killed_reason "output_limit") and the excess is discarded, so the parent's memory is bounded.
- Wall clock: after timeout_s the job is killed (timed_out, killed_reason "timeout"). The job
  is PID 1 of a fresh PID namespace, so when it exits or is killed the kernel kills every
  process it started, including double-forked, setsid'd daemons.
- Environment: the job gets PATH, HOME/TMPDIR (its working directory), LANG and the channel fd
  only; the server was started with an empty environment, so no parent secret reaches it.
- Other processes: /proc is a procfs with hidepid=2, so the job sees only its own processes
  (no command lines, environments or open files of the parent or other jobs).
- Files: the job's working directory (empty, private, removed afterwards) is the only
  writable place. Every mount is remounted read-only in the server's mount namespace, and
  /tmp, /var/tmp, /dev/shm are private tmpfs mounts the job cannot write to (so
  multiprocessing's semaphores are unavailable; os.fork and subprocess work). Directories
  other users cannot enter on the way to the interpreter (e.g. a 0700 home) are covered by a
  tmpfs that shows only that way, so the rest of such a home stays hidden.
- Signals: the parent and the server are outside the job's PID namespace (not addressable)
  and run under another uid; no_new_privs blocks setuid binaries.

What is NOT isolated:
- Reading: the job can read every world-readable file (installed packages, the repository,
  /etc, the data folder).
- Jobs of one server share one (empty) network namespace, so two running jobs could talk over
  abstract Unix sockets; their files and processes are separated by uid.
- No cgroup: CPU is bounded per process by RLIMIT_CPU, not as a share; memory is bounded per
  process, not per tree (a tree is bounded by nproc x memory_mb). Working directories live in
  one 1 GB tmpfs per server (RAM, not counted in memory_mb; files are capped at 64 MB each).
  No seccomp filter: the kernel's full syscall surface is exposed.
- Jobs inherit the server's hash seed (hash randomisation is per server, not per job).
- The job is PID 1 of its namespace: signals it sends itself whose action is the default are
  ignored (so `os.abort()` ends in SIGSEGV), and os.getppid() is 0.

Without root or namespaces the sandbox still runs jobs (rlimits, timeout, output cap, clean
environment, throwaway directory), kills only the job's process group, and warns once that
network isolation, write protection outside the working directory, the process-count limit,
protection against signalling the parent and killing setsid'd descendants are lost.
"""

from __future__ import annotations

import array
import asyncio
import concurrent.futures
import contextlib
import dataclasses
import json
import math
import os
import resource
import signal
import socket
import subprocess
import sys
import threading
import warnings
from pathlib import Path

from metaagentx.mas._sandbox_driver import Handler, Job, SandboxError, ServerLost, drive

__all__ = [
    "SandboxResult",
    "SandboxError",
    "Isolation",
    "Sandbox",
    "default_sandbox",
    "run_untrusted",
    "run_untrusted_async",
    "run_interactive",
]

DEFAULT_MAX_OUTPUT_BYTES = 8 << 20  # per stream
DEFAULT_NPROC = 64
DEFAULT_FSIZE_MB = 64
SERVER_START_TIMEOUT_S = 30.0
LOST_WITHOUT_NAMESPACES = (
    "network isolation",
    "no writes outside the working directory",
    "process-count limit (RLIMIT_NPROC)",
    "protection against signalling the parent",
    "killing descendants that leave the job's process group",
)


@dataclasses.dataclass
class SandboxResult:
    """Outcome of one sandboxed run. exit_code is -N when killed by signal N."""

    stdout: str
    stderr: str
    exit_code: int
    timed_out: bool
    killed_reason: str | None  # timeout | output_limit | channel_protocol | cpu_time | signal:X
    wall_s: float = 0.0


@dataclasses.dataclass(frozen=True)
class Isolation:
    """What the running fork server could set up."""

    namespaces: bool
    reason: str  # why namespaces are off ("" when on)
    lost: tuple[str, ...]  # properties lost without namespaces
    server_pid: int


class Sandbox:
    """One warm fork server and the jobs sent to it; thread-safe. Module functions share one."""

    def __init__(
        self, *, isolate: bool = True, nproc: int = DEFAULT_NPROC, fsize_mb: int = DEFAULT_FSIZE_MB
    ) -> None:
        self._isolate = isolate
        self._nproc = nproc
        self._fsize_mb = fsize_mb
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self._sock: socket.socket | None = None
        self._info: Isolation | None = None
        self._warned = False

    def isolation(self) -> Isolation:
        """Start the server if needed and report which isolation it has."""
        with self._lock:
            self._ensure_started()
            assert self._info is not None
            return self._info

    def close(self) -> None:
        """Stop the fork server; its running jobs die with it (their parent-death signal)."""
        with self._lock:
            self._stop()

    def _start(self) -> None:
        _raise_fd_limit()
        info = self._spawn(self._isolate)
        if info["reason"].startswith("namespace setup failed"):
            self._stop()  # a half-made namespace setup: start clean without namespaces
            reason = info["reason"]
            info = self._spawn(False)
            info["reason"] = reason
        lost = () if info["isolated"] else LOST_WITHOUT_NAMESPACES
        self._info = Isolation(info["isolated"], info["reason"], lost, info["pid"])
        if lost and not self._warned:
            self._warned = True
            warnings.warn(
                f"sandbox runs without namespaces ({info['reason']}); lost: " + ", ".join(lost),
                RuntimeWarning,
                stacklevel=4,
            )

    def _spawn(self, isolate: bool) -> dict:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        script = Path(__file__).with_name("_sandbox_server.py")
        pkg_root = str(Path(__file__).resolve().parents[2])
        cmd = [
            sys.executable,
            "-I",
            "-S",
            "-B",
            str(script),
            str(theirs.fileno()),
            pkg_root,
            "1" if isolate else "0",
        ]
        try:
            self._proc = subprocess.Popen(
                cmd,
                pass_fds=[theirs.fileno()],
                env={},
                start_new_session=True,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                close_fds=True,
            )
        finally:
            theirs.close()
        ours.settimeout(SERVER_START_TIMEOUT_S)
        try:
            ready, error = ours.recv(4096), None
        except OSError as exc:
            ready, error = b"", exc
        if not ready:
            ours.close()
            self._proc.kill()
            self._proc.wait()
            self._proc = None
            raise SandboxError(f"sandbox fork server did not start: {error or 'exited'}")
        ours.settimeout(None)
        self._sock = ours
        return json.loads(ready)

    def _stop(self) -> None:
        if self._sock is not None:
            self._sock.close()  # the server sees EOF, cleans up and exits
            self._sock = None
        if self._proc is not None:
            try:
                self._proc.wait(timeout=5.0)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            self._proc = None

    def _ensure_started(self) -> None:
        if self._proc is not None and self._proc.poll() is not None:
            self._stop()
        if self._proc is None:
            self._start()

    def _submit(self, fds: list[int]) -> None:
        with self._lock:
            for attempt in range(2):
                self._ensure_started()
                assert self._sock is not None
                try:
                    self._sock.sendmsg(
                        [b"J"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))]
                    )
                    return
                except (BrokenPipeError, ConnectionError):  # the server is gone: restart it
                    self._stop()
                    if attempt:
                        raise SandboxError("sandbox fork server keeps dying") from None

    async def run(
        self,
        code: str,
        *,
        timeout_s: float,
        memory_mb: int,
        stdin: str = "",
        handler: Handler | None = None,
        max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
    ) -> SandboxResult:
        """Run `code`; see the module docstring. Retries once if the server died mid-launch."""
        if not isinstance(code, str):
            raise TypeError(f"code must be str, got {type(code).__name__}")
        if not (timeout_s > 0 and math.isfinite(timeout_s)):
            raise ValueError(f"timeout_s must be a finite number > 0, got {timeout_s}")
        if memory_mb < 32:
            raise ValueError(f"memory_mb must be >= 32, got {memory_mb}")
        spec = {
            "code": code,
            "timeout_s": float(timeout_s),
            "memory_mb": int(memory_mb),
            "nproc": self._nproc,
            "fsize_mb": self._fsize_mb,
        }
        for attempt in range(2):
            job = Job(spec, stdin, interactive=handler is not None)
            try:
                try:
                    self._submit(job.child_fds)
                finally:
                    job.close_child_side()
                raw = await drive(
                    job,
                    handler,
                    float(timeout_s),
                    max_output_bytes,
                    self._info is not None and self._info.namespaces,
                )
                return _result(*raw)
            except ServerLost:
                if attempt:
                    raise SandboxError("sandbox server lost the job twice") from None
            finally:
                job.close()
        raise AssertionError("unreachable")

    def run_sync(
        self,
        code: str,
        *,
        timeout_s: float,
        memory_mb: int,
        stdin: str = "",
        max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
    ) -> SandboxResult:
        """Blocking `run` without a channel; safe from any thread, even one running a loop."""
        coro = self.run(
            code,
            timeout_s=timeout_s,
            memory_mb=memory_mb,
            stdin=stdin,
            max_output_bytes=max_output_bytes,
        )
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            loop = _thread_loop()
            task = loop.create_task(coro)
            try:
                return loop.run_until_complete(task)
            except BaseException:  # e.g. KeyboardInterrupt: stop the job, keep the loop clean
                task.cancel()
                with contextlib.suppress(BaseException):
                    loop.run_until_complete(task)
                raise
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            return pool.submit(asyncio.run, coro).result()

    def _forget_after_fork(self) -> None:
        """In a forked child the server belongs to the parent: start a fresh one when needed."""
        self._lock = threading.Lock()
        self._proc = self._sock = None


def _raise_fd_limit() -> None:
    """Each running job holds 4 descriptors here; lift a low soft limit (e.g. 1024) to the hard."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 65536 if hard == resource.RLIM_INFINITY else min(hard, 65536)
    if soft != resource.RLIM_INFINITY and soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


_local = threading.local()


def _thread_loop() -> asyncio.AbstractEventLoop:
    """One reusable event loop per calling thread for the sync API (asyncio.run costs ~0.4 ms)."""
    loop = getattr(_local, "loop", None)
    if loop is None or loop.is_closed():
        loop = _local.loop = asyncio.new_event_loop()
    return loop


def _result(
    status: dict, parent_reason: str | None, out: str, err: str, wall_s: float
) -> SandboxResult:
    code = int(status["exit_code"])
    reason = parent_reason
    if reason is None and status["timed_out"]:
        reason = "timeout"
    elif reason is None and code < 0:
        name = signal.Signals(-code).name if -code in signal.valid_signals() else str(-code)
        reason = "cpu_time" if name == "SIGXCPU" else f"signal:{name}"
    return SandboxResult(out, err, code, bool(status["timed_out"]), reason, round(wall_s, 4))


_default = Sandbox()


def _after_fork_in_child() -> None:
    _default._forget_after_fork()
    _local.loop = None  # the parent's loop shares its epoll fd with the parent


os.register_at_fork(after_in_child=_after_fork_in_child)


def default_sandbox() -> Sandbox:
    """The process-wide sandbox the module functions use."""
    return _default


async def run_untrusted_async(
    code: str,
    *,
    timeout_s: float,
    memory_mb: int,
    stdin: str = "",
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
) -> SandboxResult:
    """Async `run_untrusted`: many may run at once in one event loop."""
    return await _default.run(
        code,
        timeout_s=timeout_s,
        memory_mb=memory_mb,
        stdin=stdin,
        max_output_bytes=max_output_bytes,
    )


async def run_interactive(
    code: str,
    *,
    timeout_s: float,
    memory_mb: int,
    handler: Handler,
    stdin: str = "",
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
) -> SandboxResult:
    """Run `code` with a message channel: each `channel.request(obj)` in the child is answered
    with `await handler(obj)` (a dict). Requests of one child are served in order; many
    run_interactive calls may run concurrently in one loop. A handler exception kills the child
    and is re-raised here; a child that sends non-JSON is killed (killed_reason
    "channel_protocol")."""
    return await _default.run(
        code,
        timeout_s=timeout_s,
        memory_mb=memory_mb,
        stdin=stdin,
        handler=handler,
        max_output_bytes=max_output_bytes,
    )


def run_untrusted(
    code: str,
    *,
    timeout_s: float,
    memory_mb: int,
    stdin: str = "",
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
) -> SandboxResult:
    """Run untrusted `code` as `python -c` would, isolated (see the module docstring).

    Returns stdout/stderr (each capped at max_output_bytes), the exit code (-N for signal N),
    timed_out and killed_reason. Thread-safe; may be called from inside a running event loop
    (it then runs on a helper thread and blocks the caller)."""
    return _default.run_sync(
        code,
        timeout_s=timeout_s,
        memory_mb=memory_mb,
        stdin=stdin,
        max_output_bytes=max_output_bytes,
    )
