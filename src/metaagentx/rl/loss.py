"""Role-masked GRPO loss (pure) and the per-token logprobs it is computed from.

``token_logprobs`` runs the policy on a packed ``Batch`` and returns, for every position
``t``, the logprob of ``input_ids[t]`` given the tokens before it under
``log_softmax(logits / temperature)`` (the same quantity the sampler records; position 0 has
no prediction and holds 0), plus the entropy of that predictive distribution. For plain-head
architectures only loss positions get vocabulary logits (the rest hold 0).

``grpo_loss`` is a pure function of tensors: the PPO-style clipped surrogate with an
asymmetric clip range, aggregated as a token mean (default) or a sequence mean, plus an
optional k3 KL penalty to a frozen reference. Only positions with ``mask == 1`` count.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F


def _shift(values: torch.Tensor) -> torch.Tensor:
    """(B, T-1) predictions for tokens 1..T-1 -> (B, T) aligned with input_ids (0 at t=0)."""
    return F.pad(values, (1, 0), value=0.0)


# Causal LMs whose logits are exactly ``lm_head(decoder(...))`` (no soft-capping or scaling):
# for these the head and the log-softmax run on loss positions only.
HEAD_ONLY_TYPES = frozenset(
    {"llama", "mistral", "qwen2", "qwen3", "qwen2_moe", "qwen3_moe", "smollm3", "olmo2", "phi3"}
)


def _split_model(model: Any) -> tuple[Any, Any] | None:
    """``(decoder, lm_head)`` when logits are a plain head over the decoder's states, else None."""
    cfg = getattr(model, "config", None)
    if getattr(cfg, "model_type", None) not in HEAD_ONLY_TYPES:
        return None
    if not (hasattr(model, "get_decoder") and hasattr(model, "get_output_embeddings")):
        return None
    decoder, head = model.get_decoder(), model.get_output_embeddings()
    return None if decoder is None or head is None else (decoder, head)


def _picked_and_entropy(
    logits: torch.Tensor, targets: torch.Tensor, t: float
) -> tuple[torch.Tensor, torch.Tensor]:
    logits = logits.float()
    if t != 1.0:
        logits = logits / t
    lse = torch.logsumexp(logits, dim=-1)
    picked = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1) - lse
    with torch.no_grad():
        entropy = lse - (torch.softmax(logits, dim=-1) * logits).sum(-1)
    return picked, entropy


def token_logprobs(
    model: Any, batch: Any, temperature: float = 1.0, *, full: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(logprobs, entropy)``, both float32 B x T, aligned with ``batch.input_ids``.

    ``model`` is a causal LM returning ``.logits`` (e.g. a transformers ``*ForCausalLM``);
    ``batch`` has ``input_ids``, ``attention_mask``, ``position_ids`` and ``loss_mask``.
    ``temperature`` 0 (greedy sampling) is treated as 1, as the sampler does. Entropy carries
    no gradient. For known plain-head architectures (``HEAD_ONLY_TYPES``) the LM head and the
    softmax run only where ``loss_mask`` is 1 (prompt tokens are most of a row; this saves
    their vocabulary-sized logits) and other positions hold 0; ``full=True`` computes every
    position through ``model(...).logits``.
    """
    t = float(temperature) if temperature and temperature > 0 else 1.0
    inputs = {
        "input_ids": batch.input_ids,
        "attention_mask": batch.attention_mask,
        "position_ids": batch.position_ids,
        "use_cache": False,
    }
    split = None if full or getattr(batch, "loss_mask", None) is None else _split_model(model)
    if split is None:
        logits = model(**inputs).logits[:, :-1, :]
        picked, entropy = _picked_and_entropy(logits, batch.input_ids[:, 1:], t)
        return _shift(picked), _shift(entropy)
    decoder, head = split
    hidden = decoder(**inputs).last_hidden_state[:, :-1, :]
    sel = batch.loss_mask[:, 1:] > 0
    picked, entropy = _picked_and_entropy(head(hidden[sel]), batch.input_ids[:, 1:][sel], t)
    zeros = torch.zeros(sel.shape, dtype=torch.float32, device=sel.device)
    return _shift(zeros.masked_scatter(sel, picked)), _shift(zeros.masked_scatter(sel, entropy))


def _masked_stats(values: torch.Tensor, mask: torch.Tensor) -> tuple[float, float, float]:
    sel = values[mask > 0]
    if sel.numel() == 0:
        return 0.0, 0.0, 0.0
    return sel.mean().item(), sel.min().item(), sel.max().item()


def grpo_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    clip_low: float,
    clip_high: float,
    agg: str = "token_mean",
    ref_logprobs: torch.Tensor | None = None,
    kl_coef: float = 0.0,
    entropy: torch.Tensor | None = None,
    num_tokens: int | float | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Clipped GRPO loss over masked tokens and its metrics.

    Per token: ``-min(r * A, clip(r, 1 - clip_low, 1 + clip_high) * A)`` with
    ``r = exp(logprobs - old_logprobs)``, plus ``kl_coef * k3`` where
    ``k3 = exp(ref - logp) - (ref - logp) - 1`` when ``ref_logprobs`` is given.

    ``num_tokens`` is the normalizer in the aggregation's unit; pass the whole step's count when
    accumulating gradients over micro-batches (default: this batch's own count).
    ``agg="token_mean"``: sum over masked tokens / ``num_tokens`` (masked tokens).
    ``agg="seq_mean"``: mean over each row's masked tokens, summed over rows / ``num_tokens``
    (here: rows with at least one masked token).

    Metrics (floats over masked tokens): ``clip_frac`` (share where the clipped term is taken,
    i.e. no gradient), ``ratio_mean/min/max``, ``entropy`` (if given), ``kl`` (0 without a
    reference), ``pg_loss``, ``tokens``.
    """
    if agg not in ("token_mean", "seq_mean"):
        raise ValueError(f"agg: {agg!r} is not one of ['token_mean', 'seq_mean']")
    mask = mask.to(logprobs.dtype)
    log_ratio = (logprobs - old_logprobs) * mask  # 0 off the mask: no inf from padding
    ratio = torch.exp(log_ratio)
    unclipped = -advantages * ratio
    clipped = -advantages * torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high)
    per_token = torch.maximum(unclipped, clipped)
    pg_per_token = per_token
    kl_value = 0.0
    if ref_logprobs is not None:
        ref_log_ratio = (ref_logprobs - logprobs) * mask
        kl = torch.exp(ref_log_ratio) - ref_log_ratio - 1.0
        per_token = per_token + kl_coef * kl
        kl_value = _masked_stats(kl.detach(), mask)[0]
    loss = _aggregate(per_token, mask, agg, num_tokens)
    with torch.no_grad():
        n = mask.sum().item()
        clip_hits = ((clipped > unclipped).to(mask.dtype) * mask).sum().item()
        r_mean, r_min, r_max = _masked_stats(ratio, mask)
        metrics = {
            "clip_frac": clip_hits / n if n else 0.0,
            "ratio_mean": r_mean,
            "ratio_min": r_min,
            "ratio_max": r_max,
            "kl": kl_value,
            "pg_loss": _aggregate(pg_per_token, mask, agg, num_tokens).item(),
            "tokens": float(n),
        }
        if entropy is not None:
            metrics["entropy"] = _masked_stats(entropy.float(), mask)[0]
    return loss, metrics


def _aggregate(
    per_token: torch.Tensor,
    mask: torch.Tensor,
    agg: str,
    num_tokens: int | float | None,
) -> torch.Tensor:
    if agg == "token_mean":
        denom = float(num_tokens) if num_tokens is not None else mask.sum().item()
        return (per_token * mask).sum() / max(denom, 1.0)
    row_tokens = mask.sum(-1)
    row_means = (per_token * mask).sum(-1) / row_tokens.clamp(min=1.0)
    denom = float(num_tokens) if num_tokens is not None else (row_tokens > 0).sum().item()
    return row_means.sum() / max(denom, 1.0)
