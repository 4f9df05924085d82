"""Which role learns at which training step.

* ``stagewise``: one role per phase, switching every ``k`` steps, ``first_phase`` first
  (steps ``0..k-1`` train ``first_phase``, ``k..2k-1`` the other role, and so on);
* ``coupled``: both roles every step (phase ``"both"``);
* ``designer_only`` / ``executor_only``: that role every step.

Steps are 0-based. The trainer masks the inactive role's tokens out of the loss (packing
leaves its calls out), so the inactive role gets no gradient at all.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

ROLES = ("designer", "executor")
KINDS = ("stagewise", "coupled", "designer_only", "executor_only")


@dataclass(frozen=True)
class Schedule:
    """A role schedule; ``Schedule("stagewise", k=30, first_phase="executor")`` is the default."""

    kind: str = "stagewise"  # stagewise | coupled | designer_only | executor_only
    k: int = 30  # stagewise: steps per phase
    first_phase: str = "executor"  # stagewise: role trained in the first phase

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"schedule kind: {self.kind!r} is not one of {list(KINDS)}")
        if self.first_phase not in ROLES:
            raise ValueError(f"first_phase: {self.first_phase!r} is not one of {list(ROLES)}")
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 1:
            raise ValueError(f"k: steps per phase must be an integer >= 1, got {self.k!r}")

    @classmethod
    def from_config(cls, rl: Any) -> Schedule:
        """Build from a config's ``rl`` section (fields ``schedule``, ``k``, ``first_phase``)."""
        return cls(kind=rl.schedule, k=rl.k, first_phase=rl.first_phase)

    def phase_at(self, step: int) -> str:
        """``"executor"``, ``"designer"`` or ``"both"`` for the 0-based ``step``."""
        if step < 0:
            raise ValueError(f"step: must be >= 0, got {step}")
        if self.kind == "coupled":
            return "both"
        if self.kind == "designer_only":
            return "designer"
        if self.kind == "executor_only":
            return "executor"
        other = "designer" if self.first_phase == "executor" else "executor"
        return self.first_phase if (step // self.k) % 2 == 0 else other

    def roles_at(self, step: int) -> set[str]:
        """The roles whose tokens are in the loss at the 0-based ``step``."""
        phase = self.phase_at(step)
        return set(ROLES) if phase == "both" else {phase}

    def is_switch(self, step: int) -> bool:
        """True when ``step`` starts a new phase (step 0 included)."""
        return step == 0 or self.phase_at(step) != self.phase_at(step - 1)
