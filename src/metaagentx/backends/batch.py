"""A running decode batch for the hf backend: rows, KV cache, attention mask, positions.

Rows are left-padded. Each row has its own position counter, so rows that joined at different
times (different prompt lengths, different numbers of generated tokens) decode side by side:
the attention mask hides padding and ``position_ids`` give every row its true positions. New
rows are prefilled on their own and merged in (KV caches left-padded to a common length and
concatenated along the batch); finished rows are dropped, and columns that only padding
occupies are trimmed away.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from metaagentx.backends.base import SamplingParams


@dataclass
class Row:
    """One request inside the worker."""

    prompt: list[int]
    params: SamplingParams
    future: Any  # concurrent.futures.Future resolved with a GenerationResult
    generator: torch.Generator  # per-request RNG: same seed, same draws whatever the batch
    limit: int  # max new tokens (params.max_new_tokens, capped by the model's context)
    tokens: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    finish: str | None = None  # set when the row is done


def cache_layers(cache: Any) -> list[Any] | None:
    """The cache's per-layer objects when they are plain growing KV tensors, else None."""
    layers = getattr(cache, "layers", None)
    if not layers:
        return None
    for layer in layers:
        if getattr(layer, "is_sliding", False) or not hasattr(layer, "keys"):
            return None
        if getattr(layer, "keys", None) is None or layer.keys.dim() != 4:
            return None
    return list(layers)


class DecodeBatch:
    """The rows decoding together, with their cache, mask [B, T], and next positions [B]."""

    def __init__(self, rows: list[Row], cache: Any, mask: torch.Tensor, positions: torch.Tensor):
        self.rows = rows
        self.cache = cache
        self.mask = mask  # 1 where the cache column holds a real token of that row
        self.positions = positions  # position of each row's pending (not yet fed) token

    def __len__(self) -> int:
        return len(self.rows)

    def pending_tokens(self) -> torch.Tensor:
        """The last sampled token of every row: the next input, [B, 1]."""
        return torch.tensor([[r.tokens[-1]] for r in self.rows], device=self.mask.device)

    def can_merge(self) -> bool:
        return cache_layers(self.cache) is not None

    def merge(self, other: DecodeBatch) -> None:
        """Append ``other``'s rows: left-pad the shorter cache and concatenate on batch."""
        mine, theirs = cache_layers(self.cache), cache_layers(other.cache)
        width = max(self.mask.shape[1], other.mask.shape[1])
        for a, b in zip(mine, theirs):
            a.keys = torch.cat([_left_pad(a.keys, width, 2), _left_pad(b.keys, width, 2)], 0)
            a.values = torch.cat([_left_pad(a.values, width, 2), _left_pad(b.values, width, 2)], 0)
        self.mask = torch.cat([_left_pad(self.mask, width, 1), _left_pad(other.mask, width, 1)], 0)
        self.positions = torch.cat([self.positions, other.positions])
        self.rows = self.rows + other.rows

    def keep(self, keep: list[int]) -> None:
        """Keep only rows ``keep`` and trim leading columns that are padding in every row."""
        index = torch.tensor(keep, device=self.mask.device)
        self.cache.batch_select_indices(index)
        self.mask = self.mask[index]
        self.positions = self.positions[index]
        self.rows = [self.rows[i] for i in keep]
        layers = cache_layers(self.cache)
        live = self.mask.any(dim=0).nonzero()
        start = int(live[0]) if len(live) else 0
        if layers is not None and start > 0:
            for layer in layers:
                layer.keys = layer.keys[:, :, start:]
                layer.values = layer.values[:, :, start:]
            self.mask = self.mask[:, start:]


def _left_pad(t: torch.Tensor, width: int, dim: int) -> torch.Tensor:
    missing = width - t.shape[dim]
    if missing <= 0:
        return t
    shape = list(t.shape)
    shape[dim] = missing
    return torch.cat([t.new_zeros(shape), t], dim=dim)


def left_padded(prompts: list[list[int]], pad_id: int, device: Any) -> tuple[torch.Tensor, ...]:
    """Left-pad prompts: (input_ids [B, L], attention_mask [B, L], position_ids [B, L])."""
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for i, p in enumerate(prompts):
        ids[i, width - len(p) :] = torch.tensor(p, dtype=torch.long)
        mask[i, width - len(p) :] = 1
    positions = (mask.cumsum(1) - 1).clamp(min=0)
    return ids.to(device), mask.to(device), positions.to(device)
