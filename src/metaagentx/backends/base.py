"""The Generator protocol: token ids in; response ids, per-token logprobs and a finish reason out.

A backend is async-friendly: many concurrent callers ``await gen.generate(...)`` and the backend
serves pending requests in batches. Chat messages are rendered with the model's own chat
template by ``render``; the ids it returns are exactly what the model sees.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable


class GenerationError(ValueError):
    """Bad request: prompt too long, invalid sampling params, unknown model."""


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = 1.0  # 0 = greedy
    top_p: float = 1.0  # nucleus mass in (0, 1]
    max_new_tokens: int = 256  # generation stops after this many tokens (finish "length")
    stop: tuple[str, ...] = ()  # stop strings (finish "stop"; the stop string is kept in the text)
    seed: int | None = None  # per-request seed: same seed, same prompt -> same output

    def validate(self) -> None:
        if not self.temperature >= 0:
            raise GenerationError(f"temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise GenerationError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.max_new_tokens < 1:
            raise GenerationError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")


@dataclass
class GenerationResult:
    prompt_ids: list[int]  # the prompt exactly as generated from
    token_ids: list[int]  # generated ids (EOS included when it ended the sequence)
    logprobs: list[float]  # logprob of each generated token under the sampling distribution
    finish_reason: str  # "stop" (EOS or stop string) | "length"
    text: str  # decoded token_ids without special tokens


@runtime_checkable
class Generator(Protocol):
    """What the MAS runtime, rollout and eval need from a model server."""

    def render(self, messages: list[dict[str, str]]) -> list[int]:
        """Chat messages -> prompt ids with the generation prompt appended."""
        ...

    async def generate(self, prompt_ids: list[int], params: SamplingParams) -> GenerationResult:
        """Generate one response; concurrent calls are batched by the backend."""
        ...

    def decode(self, ids: list[int]) -> str:
        """Token ids -> text (special tokens skipped)."""
        ...
