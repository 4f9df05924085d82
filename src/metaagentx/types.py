"""Typed records that flow through the system: Task -> Design -> Execution[N] -> Episode.

Every LLM call is a ``Call`` holding the exact token ids the model saw and produced, so that
packing can train on it without re-tokenizing.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any, Literal

Role = Literal["designer", "executor"]


@dataclass
class Task:
    """One problem. ``kind`` picks the reward: math compares ``answer``; code runs ``tests``."""

    id: str  # unique within its dataset
    prompt: str  # the problem statement shown to the model
    kind: Literal["math", "code"]  # which reward scores it
    answer: str | None = None  # math: reference final answer
    tests: dict[str, Any] | None = None  # code: tests in the schema of shared/data/MANIFEST.md
    starter_code: str = ""  # code: function stub (call-based problems)
    source: str = ""  # dataset / benchmark name
    meta: dict[str, Any] = field(default_factory=dict)  # anything else from the row


@dataclass
class Call:
    """One LLM call, recorded exactly as generated."""

    role: Role  # designer or executor
    agent: str  # agent name inside the MAS ("designer" for the designer call)
    messages: list[dict[str, str]]  # chat messages rendered into prompt_ids
    prompt_ids: list[int]  # prompt token ids exactly as the model saw them
    response_ids: list[int]  # generated token ids
    logprobs: list[float]  # sampling-policy logprob of each response token
    finish_reason: str  # "stop" | "length" | "error"
    text: str = ""  # decoded response
    latency_s: float = 0.0  # time from submission to result


class Outcome(str, Enum):
    """How one execution of a designed MAS ended."""

    SUBMITTED = "submitted"  # the script called submit(answer)
    NO_ANSWER = "no_answer"  # the script finished without submitting
    REJECTED = "rejected"  # the script failed the static check and never ran
    RUNTIME_ERROR = "runtime_error"  # the script raised
    TIMEOUT = "timeout"  # the script ran past its wall-clock limit
    BUDGET_EXCEEDED = "budget_exceeded"  # the script used more calls or tokens than allowed


@dataclass
class Execution:
    """One run of a design: the executor calls it made and what it submitted."""

    outcome: Outcome
    answer: str | None = None  # what submit() received
    calls: list[Call] = field(default_factory=list)  # executor calls, in order made
    reason: str | None = None  # detail for non-submitted outcomes (rejection reason, error)
    reward: float = 0.0  # filled by the task's reward function
    tool_runs: int = 0  # run_python calls
    stdout: str = ""  # what the script printed (bounded)
    wall_s: float = 0.0  # wall-clock time of the execution


@dataclass
class Design:
    """A MAS design: the script and the designer call that wrote it (None for templates)."""

    script: str  # the Python script ("" when none could be extracted)
    structure: str  # template name, or the structure classified from the script
    call: Call | None = None  # the designer call (None for fixed templates)
    rejected: str | None = None  # static-check rejection reason, None when the script is valid


@dataclass
class Episode:
    """One design of one task and its N executions."""

    task: Task
    design: Design
    executions: list[Execution] = field(default_factory=list)

    def mean_reward(self) -> float:
        return sum(e.reward for e in self.executions) / max(1, len(self.executions))


def to_jsonable(obj: Any) -> Any:
    """Dataclasses and enums -> plain JSON types."""
    if hasattr(obj, "__dataclass_fields__"):
        return to_jsonable(asdict(obj))
    if isinstance(obj, Enum):
        return obj.value
    if isinstance(obj, dict):
        return {k: to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    return obj
