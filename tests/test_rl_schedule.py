"""Each schedule's phase sequence, step by step (0-based steps)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from metaagentx.rl.schedule import Schedule

E, D, B = "executor", "designer", "both"


def phases(s: Schedule, n: int) -> list[str]:
    return [s.phase_at(i) for i in range(n)]


def test_stagewise_executor_first():
    s = Schedule("stagewise", k=2, first_phase="executor")
    assert phases(s, 9) == [E, E, D, D, E, E, D, D, E]
    assert s.roles_at(0) == {"executor"}
    assert s.roles_at(2) == {"designer"}
    assert [s.is_switch(i) for i in range(5)] == [True, False, True, False, True]


def test_stagewise_designer_first_and_k1():
    assert phases(Schedule("stagewise", k=3, first_phase="designer"), 7) == [D, D, D, E, E, E, D]
    assert phases(Schedule("stagewise", k=1), 4) == [E, D, E, D]


def test_fixed_schedules():
    assert phases(Schedule("coupled", k=2), 3) == [B, B, B]
    assert Schedule("coupled").roles_at(5) == {"designer", "executor"}
    assert phases(Schedule("designer_only"), 3) == [D, D, D]
    assert Schedule("designer_only").roles_at(40) == {"designer"}
    assert phases(Schedule("executor_only"), 3) == [E, E, E]
    assert Schedule("executor_only").roles_at(0) == {"executor"}


def test_from_config():
    rl = SimpleNamespace(schedule="stagewise", k=30, first_phase="executor")
    s = Schedule.from_config(rl)
    assert s.phase_at(29) == E and s.phase_at(30) == D and s.phase_at(60) == E


def test_bad_values_are_named():
    with pytest.raises(ValueError, match="kind"):
        Schedule("alternating")
    with pytest.raises(ValueError, match="first_phase"):
        Schedule("stagewise", first_phase="critic")
    with pytest.raises(ValueError, match="k"):
        Schedule("stagewise", k=0)
    with pytest.raises(ValueError, match="step"):
        Schedule().phase_at(-1)
