"""AdamW with a linear learning-rate warmup, then constant (default) or cosine decay.

The multiplier of the peak ``lr`` at optimizer step ``s`` (0-based, i.e. the ``s``-th call of
``optimizer.step()``) is ``(s + 1) / warmup_steps`` while ``s < warmup_steps`` (so the first
step already moves the weights and step ``warmup_steps - 1`` reaches the peak), then ``1.0``
(``decay="constant"``, the usual choice for GRPO) or a cosine from 1 to 0 over the remaining
``total_steps - warmup_steps`` steps (``decay="cosine"``). Weight decay applies to matrices
only (dim >= 2), not to biases and norm weights.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import torch


def lr_multiplier(
    warmup_steps: int, total_steps: int, decay: str = "constant"
) -> Callable[[int], float]:
    """The function ``step -> lr / peak lr`` described in the module docstring."""
    if decay not in ("constant", "cosine"):
        raise ValueError(f"decay: {decay!r} is not one of ['constant', 'cosine']")
    if warmup_steps < 0 or total_steps < 0:
        raise ValueError(f"warmup_steps/total_steps must be >= 0, got {warmup_steps}/{total_steps}")

    def mult(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        if decay == "constant":
            return 1.0
        span = max(1, total_steps - warmup_steps)
        progress = min(1.0, (step - warmup_steps) / span)
        return 0.5 * (1.0 + math.cos(math.pi * progress))

    return mult


def build_optimizer(
    model: torch.nn.Module,
    lr: float,
    weight_decay: float,
    warmup_steps: int,
    total_steps: int,
    params: Iterable[torch.nn.Parameter] | None = None,
    *,
    decay: str = "constant",
    betas: tuple[float, float] = (0.9, 0.999),
) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LambdaLR]:
    """``(AdamW, LambdaLR)`` over ``params`` (default: the model's trainable parameters).

    Call ``scheduler.step()`` once after every ``optimizer.step()``.
    """
    chosen = [p for p in (model.parameters() if params is None else params) if p.requires_grad]
    if not chosen:
        raise ValueError("build_optimizer: the model has no trainable parameters")
    groups: list[dict[str, Any]] = [
        {"params": [p for p in chosen if p.dim() >= 2], "weight_decay": weight_decay},
        {"params": [p for p in chosen if p.dim() < 2], "weight_decay": 0.0},
    ]
    groups = [g for g in groups if g["params"]]
    optimizer = torch.optim.AdamW(groups, lr=lr, betas=betas)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lr_multiplier(warmup_steps, total_steps, decay)
    )
    return optimizer, scheduler
