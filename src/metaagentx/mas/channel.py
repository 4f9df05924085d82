"""Child side of the sandbox message channel (stdlib only; runs inside the sandbox).

A script started by `metaagentx.mas.sandbox.run_interactive` talks to its parent through a
dedicated socket (not stdout). The socket's fd number is in the environment variable
`METAAGENTX_CHANNEL_FD`. Messages are JSON objects, one per line, strictly request then reply:

    from metaagentx.mas.channel import request
    reply = request({"op": "ask", "agent": "solver", "message": "What is 2 + 3?"})

The parent answers each request with `await handler(obj)` and writes the reply back.
"""

from __future__ import annotations

import json
import os
import threading

CHANNEL_FD_ENV = "METAAGENTX_CHANNEL_FD"

_lock = threading.Lock()
_streams: tuple | None = None


class ChannelError(ConnectionError):
    """The channel is missing, closed by the parent, or sent something that is not a JSON object."""


def _open() -> tuple:
    global _streams
    if _streams is None:
        raw = os.environ.get(CHANNEL_FD_ENV)
        if raw is None:
            raise ChannelError(f"no channel: {CHANNEL_FD_ENV} is not set (not run_interactive?)")
        fd = int(raw)
        _streams = (os.fdopen(fd, "rb", buffering=65536), os.fdopen(os.dup(fd), "wb", buffering=0))
    return _streams


def request(obj: dict) -> dict:
    """Send `obj` (a JSON-serialisable dict) to the parent and block until its reply dict arrives."""
    if not isinstance(obj, dict):
        raise TypeError(f"request() takes a dict, got {type(obj).__name__}")
    line = (json.dumps(obj, ensure_ascii=False) + "\n").encode("utf-8")
    with _lock:
        reader, writer = _open()
        try:
            writer.write(line)
            answer = reader.readline()
        except OSError as exc:
            raise ChannelError(f"channel write/read failed: {exc}") from exc
    if not answer:
        raise ChannelError("the parent closed the channel")
    reply = json.loads(answer)
    if not isinstance(reply, dict):
        raise ChannelError(f"reply is not a JSON object: {type(reply).__name__}")
    return reply
