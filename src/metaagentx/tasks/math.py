"""Math reward: the final answer of a response, checked against the reference with math-verify.

``math_reward(response, answer) -> 1.0 | 0.0`` and ``math_reward_details(...) -> (reward,
reason)``. Called by ``metaagentx.tasks.reward`` during training and ``metaagentx eval``.

The final answer is, in order: the last ``\\boxed{...}`` (balanced braces, also ``\\fbox``);
else the text after the last clearly marked "Final answer:" / "The answer is" / "Answer:";
else the whole response when it is one short line (a bare ``submit("204")``). Anything else
has no answer and scores 0 (reason ``no_answer``).

Equivalence is math-verify's, set strictly (see ``_math_worker``): exact for integers,
fractions, radicals, symbolic expressions, tuples (ordered) and intervals (open vs closed);
floats only match after rounding to 6 decimals. Verification runs in a small pool of worker
processes (math-verify's own timeout uses signals, which fail off the main thread), each job
under our own wall-clock limit; a job past the limit scores 0 with reason ``timeout`` and its
worker is killed and replaced. Safe to call from any thread; ``math_reward_async`` for asyncio.
"""

from __future__ import annotations

import asyncio
import atexit
import json
import os
import re
import select
import subprocess
import sys
import threading
import time
from pathlib import Path

DEFAULT_TIMEOUT_S = 5.0  # wall-clock limit for one verification
STARTUP_TIMEOUT_S = 120.0  # a fresh worker must import math-verify within this
_MARKERS = re.compile(
    r"(?:final\s+answer\s*(?:is)?\s*[:：]?|the\s+answer\s+is\s*[:：]?|^\s*answer\s*[:：])",
    re.IGNORECASE | re.MULTILINE,
)


def last_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` / ``\\fbox{...}`` with balanced braces, or None."""
    best = None
    for m in re.finditer(r"\\(?:boxed|fbox)\s*\{", text):
        depth, i = 1, m.end()
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        if depth == 0:
            best = text[m.end() : i - 1]
    return best


def extract_final_answer(response: str) -> str | None:
    """The final answer in ``response`` (see the module docstring), stripped, or None."""
    boxed = last_boxed(response)
    if boxed is not None:
        return boxed.strip() or None
    marks = list(_MARKERS.finditer(response))
    if marks:
        tail = response[marks[-1].end() :].strip()
        line = tail.split("\n", 1)[0].strip()
        line = line.strip("*").strip()
        if line.startswith("$") and line.count("$") >= 2:
            line = line[1 : line.index("$", 1)]
        line = line.rstrip(".").strip()
        return line or None
    text = response.strip()
    if text and "\n" not in text and len(text) <= 80:
        text = text.strip("$").rstrip(".").strip()
        return text or None
    return None


class _Worker:
    """One verification process speaking JSON lines (see ``_math_worker``)."""

    def __init__(self) -> None:
        env = dict(os.environ)
        src = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "metaagentx.tasks._math_worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        self._buf = b""
        self.ready = False

    def read_line(self, timeout_s: float) -> dict | None:
        """The next JSON line, or None when none arrives within ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 65536)
            if not chunk:
                raise RuntimeError("math-verify worker exited unexpectedly")
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return json.loads(line)

    def ask(self, job: dict, timeout_s: float) -> dict | None:
        if not self.ready:
            if self.read_line(STARTUP_TIMEOUT_S) is None:
                raise RuntimeError("math-verify worker did not start in time")
            self.ready = True
        try:
            self.proc.stdin.write((json.dumps(job) + "\n").encode())
            self.proc.stdin.flush()
            return self.read_line(timeout_s)
        except (RuntimeError, OSError):  # it died on this input (e.g. a C-level crash)
            self.proc.wait()
            return {"ok": False, "reason": f"verifier_crashed (exit {self.proc.returncode})"}

    def alive(self) -> bool:
        """A ready worker that answers a ping: one that died while idle is never handed a job,
        so its death is not blamed on the next input."""
        if not self.ready or self.proc.poll() is not None:
            return False
        try:
            self.proc.stdin.write(b'{"ping": true}\n')
            self.proc.stdin.flush()
            return self.read_line(STARTUP_TIMEOUT_S) == {"pong": True}
        except (RuntimeError, OSError, ValueError):
            return False

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()


class _Pool:
    """Up to ``size`` workers, started lazily; a job borrows one exclusively."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._idle: list[_Worker] = []
        self._all: list[_Worker] = []
        self._lock = threading.Lock()
        self._slots = threading.Semaphore(size)

    def run(self, job: dict, timeout_s: float) -> dict | None:
        with self._slots:
            with self._lock:
                worker = self._idle.pop() if self._idle else None
            if worker is not None and not worker.alive():
                self._discard(worker)
                worker = None
            if worker is None:
                worker = _Worker()
                with self._lock:
                    self._all.append(worker)
            try:
                result = worker.ask(job, timeout_s)
            except BaseException:
                self._discard(worker)
                raise
            if result is None or worker.proc.poll() is not None:  # stuck or dead: replace it
                self._discard(worker)
            else:
                with self._lock:
                    self._idle.append(worker)
            return result

    def _discard(self, worker: _Worker) -> None:
        worker.kill()
        with self._lock:
            if worker in self._all:
                self._all.remove(worker)

    def close(self) -> None:
        with self._lock:
            workers, self._all, self._idle = self._all, [], []
        for w in workers:
            w.kill()


_POOL: _Pool | None = None
_POOL_LOCK = threading.Lock()


def _pool() -> _Pool:
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = _Pool(size=max(1, min(4, os.cpu_count() or 1)))
            atexit.register(_POOL.close)
        return _POOL


def math_reward_details(
    response: str, answer: str, *, timeout_s: float = DEFAULT_TIMEOUT_S
) -> tuple[float, str]:
    """(reward, reason): reason is correct | wrong | no_answer | unparsable_answer | timeout
    (or verifier_crashed / verify_error: ... when math-verify itself failed on this input)."""
    pred = extract_final_answer(response or "")
    if pred is None:
        return 0.0, "no_answer"
    result = _pool().run({"gold": answer, "pred": pred}, timeout_s)
    if result is None:
        return 0.0, "timeout"
    return (1.0 if result["ok"] else 0.0), result["reason"]


def math_reward(response: str, answer: str, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> float:
    """1.0 when the final answer in ``response`` equals ``answer`` (math-verify), else 0.0."""
    return math_reward_details(response, answer, timeout_s=timeout_s)[0]


async def math_reward_async(
    response: str, answer: str, *, timeout_s: float = DEFAULT_TIMEOUT_S
) -> tuple[float, str]:
    """``math_reward_details`` without blocking the event loop."""
    return await asyncio.to_thread(math_reward_details, response, answer, timeout_s=timeout_s)
