"""Designer and executor advantages from one task's M x N reward matrix (pure functions).

For one task, ``rewards[i][j]`` is the reward of execution ``j`` of design ``i``:

* designer advantage of design ``i`` = the mean of ``rewards[i]`` normalized across the task's
  M designs: ``(x - mean) / (std + 1e-6)`` with the population std;
* executor advantage of run ``(i, j)`` = ``rewards[i][j]`` normalized across all M x N runs of
  the task (``group="task"``, the default) or across design ``i``'s N runs only
  (``group="design"``, an ablation). The trainer gives it to every call of that run.

A group whose values are all equal (zero spread, including a group of one) gets all-zero
advantages: nothing in it is better or worse than anything else.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

EPS = 1e-6  # added to the population std before dividing


def normalize(values: Sequence[float]) -> list[float]:
    """``(x - mean) / (population std + EPS)`` for each value; all zeros when all are equal."""
    if not values:
        return []
    xs = [float(v) for v in values]
    if max(xs) == min(xs):
        return [0.0] * len(xs)
    mean = sum(xs) / len(xs)
    std = math.sqrt(sum((x - mean) ** 2 for x in xs) / len(xs))
    return [(x - mean) / (std + EPS) for x in xs]


def _check(rewards: Sequence[Sequence[float]]) -> None:
    if not rewards:
        raise ValueError("rewards: expected M >= 1 designs, got an empty list")
    for i, row in enumerate(rewards):
        if len(row) == 0:
            raise ValueError(f"rewards[{i}]: design {i} has no executions (need N >= 1)")


def designer_advantages(rewards: Sequence[Sequence[float]]) -> list[float]:
    """One advantage per design: its mean reward over its runs, normalized across the M designs.

    ``rewards`` is the task's M x N matrix (rows may differ in length). M = 1 gives ``[0.0]``.
    """
    _check(rewards)
    means = [sum(float(r) for r in row) / len(row) for row in rewards]
    return normalize(means)


def executor_advantages(
    rewards: Sequence[Sequence[float]], group: Literal["task", "design"] = "task"
) -> list[list[float]]:
    """One advantage per run (M x N), normalized over the whole task or within each design.

    ``group="task"``: all M x N runs of the task form one group (the method's default).
    ``group="design"``: each design's N runs form their own group (ablation).
    """
    _check(rewards)
    if group == "design":
        return [normalize(row) for row in rewards]
    if group != "task":
        raise ValueError(f"group: {group!r} is not one of ['task', 'design']")
    flat = normalize([r for row in rewards for r in row])
    out: list[list[float]] = []
    pos = 0
    for row in rewards:
        out.append(flat[pos : pos + len(row)])
        pos += len(row)
    return out


def advantage_stats(values: Sequence[float]) -> dict[str, float]:
    """``mean``, population ``std`` and ``frac_zero`` (share of exact zeros) of advantages.

    Empty input gives zeros, so a step in which a role has no rows still logs numbers.
    """
    if not values:
        return {"mean": 0.0, "std": 0.0, "frac_zero": 0.0}
    xs = [float(v) for v in values]
    mean = sum(xs) / len(xs)
    std = math.sqrt(sum((x - mean) ** 2 for x in xs) / len(xs))
    frac_zero = sum(1 for x in xs if x == 0.0) / len(xs)
    return {"mean": mean, "std": std, "frac_zero": frac_zero}
