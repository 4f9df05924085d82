"""Tasks and rewards: loaders (``datasets``), math reward (``math``), code reward (``code``).

``reward(task, answer_text)`` scores one final answer for a task, dispatching on
``task.kind``; ``reward_details`` also gives the pass fraction and the reason. Used by the
rollout (each execution's submitted answer) and by ``metaagentx eval``.
"""

from __future__ import annotations

from typing import Any

from metaagentx.types import Task

__all__ = ["reward", "reward_details", "reward_details_async", "program_from_answer"]


def program_from_answer(answer_text: str) -> str:
    """The program in a code answer: the last fenced block if there is one, else the text."""
    from metaagentx.tasks.code import extract_program

    return extract_program(answer_text) or answer_text


def reward_details(
    task: Task, answer_text: str | None, *, timeout_s: float = 6.0
) -> dict[str, Any]:
    """Score ``answer_text`` for ``task``: {reward, pass_fraction, reason} (+ code details).

    math: ``math_reward_details`` against ``task.answer`` (pass_fraction = reward);
    code: ``code_reward_details`` of the extracted program against ``task.tests``.
    """
    if task.kind == "math":
        if task.answer is None:
            raise ValueError(f"math task {task.id!r} has no answer")
        from metaagentx.tasks.math import math_reward_details

        value, reason = math_reward_details(answer_text or "", task.answer)
        return {"reward": value, "pass_fraction": value, "reason": reason}
    if task.kind == "code":
        if not task.tests:
            raise ValueError(f"code task {task.id!r} has no tests")
        from metaagentx.tasks.code import code_reward_details

        program = program_from_answer(answer_text or "")
        return code_reward_details(program, task.tests, timeout_s=timeout_s)
    raise ValueError(f"task {task.id!r}: unknown kind {task.kind!r} (expected math or code)")


async def reward_details_async(
    task: Task, answer_text: str | None, *, timeout_s: float = 6.0
) -> dict[str, Any]:
    """``reward_details`` for asyncio code: never blocks the event loop."""
    if task.kind == "code" and task.tests:
        from metaagentx.tasks.code import code_reward_details_async

        program = program_from_answer(answer_text or "")
        return await code_reward_details_async(program, task.tests, timeout_s=timeout_s)
    import asyncio

    return await asyncio.to_thread(reward_details, task, answer_text, timeout_s=timeout_s)


def reward(task: Task, answer_text: str | None) -> float:
    """The reward (1.0 or 0.0) of ``answer_text`` as the final answer to ``task``."""
    return reward_details(task, answer_text)["reward"]
