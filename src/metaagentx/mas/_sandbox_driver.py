"""Parent side of one sandbox job: its descriptors, output capture, channel and status.

Private helper of `metaagentx.mas.sandbox` (which documents the behaviour); the server side is
`_sandbox_server.py`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import time
from collections.abc import Awaitable, Callable

MAX_MESSAGE_BYTES = 16 << 20  # one channel message
GUARD_S = 30.0  # extra wait beyond timeout_s before the parent gives up on the server

Handler = Callable[[dict], Awaitable[dict]]


class SandboxError(RuntimeError):
    """The sandbox machinery itself failed (not the untrusted code)."""


class ServerLost(Exception):
    """The server went away before starting the job (safe to resend)."""


class _ProtocolError(Exception):
    pass


def _memfd(name: str, data: bytes, readonly: bool) -> int:
    fd = os.memfd_create(name, os.MFD_CLOEXEC)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if not readonly:
            return fd
        return os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_CLOEXEC)
    finally:
        if readonly:
            os.close(fd)


class Job:
    """The parent's ends and the child's ends of one job's descriptors."""

    def __init__(self, spec: dict, stdin: str, *, interactive: bool) -> None:
        self.child_fds: list[int] = []
        self.own: list = []
        try:
            self.child_fds.append(_memfd("spec", json.dumps(spec).encode(), readonly=False))
            self.ctl, ctl_child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            self.own.append(self.ctl)
            self.child_fds.append(ctl_child.detach())
            self.child_fds.append(_memfd("stdin", stdin.encode("utf-8"), readonly=True))
            for name in ("out", "err"):
                r, w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
                os.set_blocking(w, True)
                setattr(self, name, r)
                self.own.append(r)
                self.child_fds.append(w)
            self.chan: socket.socket | None = None
            if interactive:
                self.chan, chan_child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
                self.own.append(self.chan)
                self.chan.setblocking(False)
                self.child_fds.append(chan_child.detach())
            self.ctl.setblocking(False)
        except BaseException:
            self.close_child_side()
            self.close()
            raise

    def close_child_side(self) -> None:
        for fd in self.child_fds:
            os.close(fd)
        self.child_fds = []

    def close(self) -> None:
        for item in self.own:
            item.close() if isinstance(item, socket.socket) else os.close(item)
        self.own = []

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            self.ctl.send(b"k")


class _Capture:
    def __init__(self) -> None:
        self.chunks: list[bytes] = []
        self.total = 0

    def text(self) -> str:
        return b"".join(self.chunks).decode("utf-8", "replace")


def _wake(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_result(None)


async def _read_capped(fd: int, cap: int, capture: _Capture, on_overflow: Callable) -> None:
    loop = asyncio.get_running_loop()
    while True:
        try:
            data = os.read(fd, 1 << 16)
        except BlockingIOError:
            fut = loop.create_future()
            loop.add_reader(fd, _wake, fut)
            try:
                await fut
            finally:
                loop.remove_reader(fd)
            continue
        if not data:
            return
        room = cap - capture.total
        if room > 0:
            capture.chunks.append(data[:room])
        capture.total += len(data)
        if capture.total > cap and capture.total - len(data) <= cap:
            on_overflow()


async def _read_status(sock: socket.socket) -> dict:
    """The server acks a started job with b"s", then sends one JSON status line at its end."""
    loop = asyncio.get_running_loop()
    buf = b""
    while not buf.endswith(b"\n"):
        data = await loop.sock_recv(sock, 4096)
        if not data:
            if not buf:
                raise ServerLost()  # never started: safe to resend
            raise SandboxError("sandbox server died while the job ran")
        buf += data
    status = json.loads(buf[1:] if buf.startswith(b"s") else buf)
    if "error" in status:
        raise SandboxError(f"sandbox server could not start the job: {status['error']}")
    return status


async def _serve_channel(sock: socket.socket, handler: Handler) -> None:
    loop = asyncio.get_running_loop()
    buf = bytearray()
    while True:
        data = await loop.sock_recv(sock, 1 << 16)
        if not data:
            return
        buf += data
        while (end := buf.find(b"\n")) >= 0:
            line = bytes(buf[:end])
            del buf[: end + 1]
            try:
                obj = json.loads(line)
            except ValueError as exc:
                raise _ProtocolError(f"channel message is not JSON: {exc}") from None
            if not isinstance(obj, dict):
                raise _ProtocolError(f"channel message is a {type(obj).__name__}, not an object")
            reply = await handler(obj)
            if not isinstance(reply, dict):
                raise TypeError(f"sandbox handler must return a dict, got {type(reply).__name__}")
            try:
                await loop.sock_sendall(sock, (json.dumps(reply) + "\n").encode("utf-8"))
            except OSError:
                return
        if len(buf) > MAX_MESSAGE_BYTES:
            raise _ProtocolError(f"channel message over {MAX_MESSAGE_BYTES} bytes")


async def drive(
    job: Job, handler: Handler | None, timeout_s: float, cap: int, isolated: bool
) -> tuple[dict, str | None, str, str, float]:
    """Collect output, serve the channel and wait for the server's status line.

    Returns (status, the reason the parent killed the job or None, stdout, stderr, wall_s)."""
    t0 = time.monotonic()
    reasons: list[str] = []

    def kill(reason: str) -> None:
        reasons.append(reason)
        job.kill()

    out, err = _Capture(), _Capture()
    readers = [
        asyncio.ensure_future(_read_capped(job.out, cap, out, lambda: kill("output_limit"))),
        asyncio.ensure_future(_read_capped(job.err, cap, err, lambda: kill("output_limit"))),
    ]
    status_task = asyncio.ensure_future(_read_status(job.ctl))
    chan_task = (
        asyncio.ensure_future(_serve_channel(job.chan, handler))
        if handler is not None and job.chan is not None
        else None
    )
    handler_error: BaseException | None = None
    try:
        pending = {status_task} | ({chan_task} if chan_task else set())
        deadline = time.monotonic() + timeout_s + GUARD_S
        while not status_task.done():
            done, pending = await asyncio.wait(
                pending,
                timeout=max(0.0, deadline - time.monotonic()),
                return_when=asyncio.FIRST_COMPLETED,
            )
            if not done:
                if "unresponsive" in reasons:
                    raise SandboxError("sandbox server did not answer a kill request")
                kill("unresponsive")
                deadline = time.monotonic() + 10.0
            if chan_task in done and chan_task.exception() is not None:
                exc = chan_task.exception()
                if isinstance(exc, _ProtocolError):
                    kill("channel_protocol")
                else:
                    handler_error = exc
                    kill("handler_error")
        status = status_task.result()
        # Isolated: the namespace is empty once the status arrives, so the pipes are at EOF.
        await asyncio.wait(readers, timeout=10.0 if isolated else 0.5)
    finally:
        for task in (*readers, status_task, chan_task):
            if task is not None and not task.done():
                task.cancel()
        await asyncio.gather(
            *[t for t in (*readers, chan_task) if t is not None], return_exceptions=True
        )
    if handler_error is not None:
        raise handler_error
    return (status, reasons[0] if reasons else None, out.text(), err.text(), time.monotonic() - t0)
