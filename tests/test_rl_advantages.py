"""Advantages against hand-computed examples (population std, eps 1e-6, zero spread -> 0)."""

from __future__ import annotations

import math

import pytest

from metaagentx.rl.advantages import (
    advantage_stats,
    designer_advantages,
    executor_advantages,
    normalize,
)


def close(got: list[list[float]], want: list[list[float]]) -> bool:
    """Same nested shape and every value within 1e-12."""
    return [len(r) for r in got] == [len(r) for r in want] and all(
        g == pytest.approx(w, abs=1e-12) for g, w in zip(got, want)
    )


# Task with M=3 designs, N=2 runs each.
R = [[1.0, 0.0], [0.0, 0.0], [1.0, 1.0]]


def test_designer_advantage_hand_example():
    # design means 0.5, 0.0, 1.0 -> mean 0.5, population var (0 + .25 + .25)/3 = 1/6
    std = math.sqrt(1 / 6)
    expected = [0.0, -0.5 / (std + 1e-6), 0.5 / (std + 1e-6)]
    assert designer_advantages(R) == pytest.approx(expected, abs=1e-12)
    assert designer_advantages(R)[2] == pytest.approx(1.2247419, abs=1e-6)


def test_executor_advantage_task_group():
    # all six runs: mean 0.5, std 0.5 -> +-0.5 / 0.500001
    a = 0.5 / 0.500001
    assert close(executor_advantages(R), [[a, -a], [-a, -a], [a, a]])
    assert executor_advantages(R, group="task") == executor_advantages(R)


def test_executor_advantage_design_group():
    # design 0: [1, 0] -> mean .5, std .5; designs 1 and 2 have zero spread
    a = 0.5 / 0.500001
    assert close(executor_advantages(R, group="design"), [[a, -a], [0.0, 0.0], [0.0, 0.0]])


def test_non_binary_rewards():
    # [3, 1, 2, 2]: mean 2, var (1+1+0+0)/4 = .5
    s = math.sqrt(0.5) + 1e-6
    assert close(executor_advantages([[3.0, 1.0], [2.0, 2.0]]), [[1 / s, -1 / s], [0.0, 0.0]])
    assert designer_advantages([[3.0, 1.0], [2.0, 2.0]]) == [0.0, 0.0]  # equal means


def test_zero_spread_gives_zeros():
    assert designer_advantages([[1.0, 1.0], [1.0, 1.0]]) == [0.0, 0.0]
    assert executor_advantages([[0.0, 0.0], [0.0, 0.0]]) == [[0.0, 0.0], [0.0, 0.0]]
    # 0.1 is inexact in binary: the zero-spread rule must still give exact zeros
    assert normalize([0.1, 0.1, 0.1]) == [0.0, 0.0, 0.0]


def test_single_design_and_single_run():
    assert designer_advantages([[1.0, 0.0, 1.0]]) == [0.0]
    a = 1 / 3 / (math.sqrt(2 / 9) + 1e-6)  # runs 1,0,1: mean 2/3, var 2/9
    assert close(executor_advantages([[1.0, 0.0, 1.0]]), [[a, -2 * a, a]])
    assert executor_advantages([[1.0]]) == [[0.0]]


def test_ragged_rows_keep_their_shape():
    out = executor_advantages([[1.0], [0.0, 0.0, 1.0]])
    assert [len(r) for r in out] == [1, 3]
    # 1,0,0,1: mean .5 std .5
    a = 0.5 / 0.500001
    assert close(out, [[a], [-a, -a, a]])


def test_errors_name_the_problem():
    with pytest.raises(ValueError, match="empty"):
        designer_advantages([])
    with pytest.raises(ValueError, match=r"rewards\[1\]"):
        executor_advantages([[1.0], []])
    with pytest.raises(ValueError, match="group"):
        executor_advantages(R, group="episode")  # type: ignore[arg-type]


def test_advantage_stats():
    st = advantage_stats([1.0, -1.0, 0.0, 0.0])
    assert st["mean"] == 0.0
    assert st["std"] == pytest.approx(math.sqrt(0.5))
    assert st["frac_zero"] == 0.5
    assert advantage_stats([]) == {"mean": 0.0, "std": 0.0, "frac_zero": 0.0}
