"""Calls -> token rows with role masks -> token-budget micro-batches (no pad-to-max).

This is the one place where loss masks are built:

* every recorded LLM call becomes one ``Row``: ``input_ids = prompt_ids + response_ids``,
  taken from the recorded ids (never re-tokenized); prompt tokens have ``loss_mask`` 0,
  response tokens 1;
* the designer call of episode ``i`` carries ``designer_adv[i]``; every executor call of
  execution ``j`` of episode ``i`` carries ``executor_adv[(i, j)]`` (one advantage per run,
  shared by all its calls);
* a call whose role is not in ``train_roles`` gives no row at all (the role mask), so the
  inactive role of a stagewise schedule contributes no tokens and no gradient.

``make_batches`` sorts rows by length (longest first) and fills micro-batches greedily while
``rows x longest row <= token_budget``; each micro-batch is right-padded only to its own
longest row. Position ``t`` of ``old_logprobs`` / ``advantages`` / ``loss_mask`` refers to
token ``input_ids[t]``, matching ``loss.token_logprobs``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from metaagentx.types import Call, Episode


@dataclass
class Row:
    """One call as a training row; per-token lists all have ``len(input_ids)`` entries."""

    input_ids: list[int]  # prompt ids followed by response ids, exactly as recorded
    loss_mask: list[int]  # 1 on response tokens (trained), 0 on prompt tokens
    advantages: list[float]  # the call's advantage on response tokens, 0.0 on prompt tokens
    old_logprobs: list[float]  # sampling logprob on response tokens, 0.0 on prompt tokens
    role: str  # "designer" | "executor"
    meta: dict[str, Any] = field(default_factory=dict)  # episode / execution / call indices

    def __len__(self) -> int:
        return len(self.input_ids)


def _check_call(call: Call, where: str) -> None:
    """Fail loud when a recorded call cannot be what the model saw and produced."""
    if not call.prompt_ids:
        raise ValueError(f"{where}: prompt_ids is empty (the model always sees a prompt)")
    if len(call.logprobs) != len(call.response_ids):
        raise ValueError(
            f"{where}: {len(call.logprobs)} logprobs for {len(call.response_ids)} response_ids"
        )
    for name, ids in (("prompt_ids", call.prompt_ids), ("response_ids", call.response_ids)):
        if any(isinstance(t, bool) or not isinstance(t, int) or t < 0 for t in ids):
            raise ValueError(f"{where}: {name} holds a value that is not a token id (int >= 0)")
    if any(not math.isfinite(lp) or lp > 1e-4 for lp in call.logprobs):
        raise ValueError(f"{where}: logprobs must be finite and <= 0")


def row_from_call(call: Call, advantage: float, meta: dict[str, Any]) -> Row:
    """One call -> one ``Row`` (prompt masked out, response in the loss with ``advantage``)."""
    p, r = len(call.prompt_ids), len(call.response_ids)
    return Row(
        input_ids=list(call.prompt_ids) + list(call.response_ids),
        loss_mask=[0] * p + [1] * r,
        advantages=[0.0] * p + [float(advantage)] * r,
        old_logprobs=[0.0] * p + [float(x) for x in call.logprobs],
        role=call.role,
        meta=meta,
    )


def _trainable(call: Call, where: str, expected_role: str, render: Callable | None) -> bool:
    if call.role != expected_role:
        raise ValueError(f"{where}: role is {call.role!r}, expected {expected_role!r}")
    _check_call(call, where)
    if render is not None and list(render(call.messages)) != list(call.prompt_ids):
        raise ValueError(f"{where}: prompt_ids differ from the chat template's rendering")
    return len(call.response_ids) > 0  # an empty response has nothing to train


def rows_from_episodes(
    episodes: Sequence[Episode],
    designer_adv: dict[int, float],
    executor_adv: dict[tuple[int, int], float],
    train_roles: set[str],
    *,
    render: Callable[[list[dict[str, str]]], list[int]] | None = None,
) -> list[Row]:
    """Training rows of every call of the trainable roles, in episode order.

    ``designer_adv[i]`` is episode ``i``'s designer advantage, ``executor_adv[(i, j)]`` the
    executor advantage of execution ``j`` of episode ``i``; only the entries of trainable roles
    are looked up. Calls with no response tokens give no row. ``render`` (optional, e.g. the
    generator's ``render``) additionally checks each prompt against the chat template.
    """
    bad = set(train_roles) - {"designer", "executor"}
    if bad:
        raise ValueError(f"train_roles: unknown role(s) {sorted(bad)}")
    rows: list[Row] = []
    for i, ep in enumerate(episodes):
        call = ep.design.call
        if "designer" in train_roles and call is not None:
            where = f"episode {i} designer call"
            if _trainable(call, where, "designer", render):
                if i not in designer_adv:
                    raise KeyError(f"designer_adv: no advantage for episode {i}")
                meta = {"episode": i, "execution": None, "call": 0, "task_id": ep.task.id}
                rows.append(row_from_call(call, designer_adv[i], meta))
        if "executor" not in train_roles:
            continue
        for j, ex in enumerate(ep.executions):
            for k, call in enumerate(ex.calls):
                where = f"episode {i} execution {j} call {k}"
                if not _trainable(call, where, "executor", render):
                    continue
                if (i, j) not in executor_adv:
                    raise KeyError(f"executor_adv: no advantage for (episode {i}, execution {j})")
                meta = {"episode": i, "execution": j, "call": k, "task_id": ep.task.id}
                rows.append(row_from_call(call, executor_adv[(i, j)], meta))
    return rows


@dataclass
class Batch:
    """One micro-batch: B x T tensors, right-padded to the longest row in it."""

    input_ids: torch.Tensor  # long, pad 0
    attention_mask: torch.Tensor  # long, 1 on real tokens
    position_ids: torch.Tensor  # long, 0..len-1 per row, 0 on padding
    loss_mask: torch.Tensor  # float, 1 on trained (response) tokens
    advantages: torch.Tensor  # float32
    old_logprobs: torch.Tensor  # float32
    roles: list[str] = field(default_factory=list)  # role of each row

    @property
    def num_tokens(self) -> int:
        """Trained (loss-masked) tokens in this micro-batch."""
        return int(self.loss_mask.sum().item())

    @property
    def real_tokens(self) -> int:
        """Non-padding tokens (prompt + response) in this micro-batch."""
        return int(self.attention_mask.sum().item())

    def to(self, device: torch.device | str) -> Batch:
        """A copy with every tensor on ``device``."""
        names = ("input_ids", "attention_mask", "position_ids", "loss_mask", "advantages")
        moved = {k: getattr(self, k).to(device) for k in (*names, "old_logprobs")}
        return Batch(**moved, roles=list(self.roles))


def collate(rows: Sequence[Row], pad_to: int | None = None) -> Batch:
    """Right-pad ``rows`` to their longest row (or to ``pad_to``) and stack them as tensors."""
    if not rows:
        raise ValueError("collate: no rows")
    width = max(len(r) for r in rows)
    if pad_to is not None:
        if pad_to < width:
            raise ValueError(f"pad_to: {pad_to} is shorter than the longest row ({width})")
        width = pad_to
    n = len(rows)
    ids = torch.zeros(n, width, dtype=torch.long)
    attn = torch.zeros(n, width, dtype=torch.long)
    pos = torch.zeros(n, width, dtype=torch.long)
    mask = torch.zeros(n, width, dtype=torch.float32)
    adv = torch.zeros(n, width, dtype=torch.float32)
    old = torch.zeros(n, width, dtype=torch.float32)
    for b, row in enumerate(rows):
        L = len(row)
        if not (len(row.loss_mask) == len(row.advantages) == len(row.old_logprobs) == L):
            raise ValueError(f"row {b} ({row.meta}): per-token lists differ in length")
        ids[b, :L] = torch.tensor(row.input_ids, dtype=torch.long)
        attn[b, :L] = 1
        pos[b, :L] = torch.arange(L)
        mask[b, :L] = torch.tensor(row.loss_mask, dtype=torch.float32)
        adv[b, :L] = torch.tensor(row.advantages, dtype=torch.float32)
        old[b, :L] = torch.tensor(row.old_logprobs, dtype=torch.float32)
    return Batch(ids, attn, pos, mask, adv, old, roles=[r.role for r in rows])


def make_batches(rows: Sequence[Row], token_budget: int) -> list[Batch]:
    """Token-budget micro-batches: longest rows first, ``B x T <= token_budget`` per batch.

    A row longer than the budget gets a micro-batch of its own. Every row lands in exactly
    one batch; order inside the sort is stable (ties keep their input order).
    """
    if token_budget < 1:
        raise ValueError(f"token_budget: must be >= 1, got {token_budget}")
    order = sorted(range(len(rows)), key=lambda i: -len(rows[i]))
    groups: list[list[Row]] = []
    for i in order:
        row = rows[i]
        if groups:
            current = groups[-1]
            width = len(current[0])  # the first row is the longest (sorted)
            if (len(current) + 1) * width <= token_budget:
                current.append(row)
                continue
        groups.append([row])
    return [collate(g) for g in groups]
