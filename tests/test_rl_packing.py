"""Packing: role masks, advantages per call, recorded-id checks, token-budget batches."""

from __future__ import annotations

import random

import pytest
import torch

from metaagentx.rl.packing import Row, collate, make_batches, rows_from_episodes
from metaagentx.types import Call, Design, Episode, Execution, Outcome, Task


def call(role: str, prompt: list[int], resp: list[int], lp: float = -0.5) -> Call:
    return Call(
        role=role,  # type: ignore[arg-type]
        agent="designer" if role == "designer" else "solver",
        messages=[{"role": "user", "content": "q"}],
        prompt_ids=prompt,
        response_ids=resp,
        logprobs=[lp] * len(resp),
        finish_reason="stop",
    )


def episodes() -> list[Episode]:
    """Two episodes; episode 0 has 2 executions (2 calls, 1 call), episode 1 has 1 (1 call)."""
    task = Task(id="t0", prompt="1+1?", kind="math", answer="2")
    ep0 = Episode(
        task=task,
        design=Design(script="s", structure="single", call=call("designer", [1, 2, 3], [4, 5])),
        executions=[
            Execution(
                Outcome.SUBMITTED,
                "2",
                [call("executor", [6, 7], [8]), call("executor", [9], [10, 11, 12], -0.25)],
            ),
            Execution(Outcome.SUBMITTED, "3", [call("executor", [13, 14], [15, 16])]),
        ],
    )
    ep1 = Episode(
        task=task,
        design=Design(script="s", structure="single", call=call("designer", [20], [21, 22, 23])),
        executions=[Execution(Outcome.NO_ANSWER, None, [call("executor", [30, 31, 32], [33])])],
    )
    return [ep0, ep1]


DADV = {0: 1.5, 1: -1.5}
EADV = {(0, 0): 0.7, (0, 1): -0.3, (1, 0): 0.1}


def test_rows_both_roles_exact_tokens_masks_advantages():
    rows = rows_from_episodes(episodes(), DADV, EADV, {"designer", "executor"})
    assert [r.role for r in rows] == [
        "designer",
        "executor",
        "executor",
        "executor",
        "designer",
        "executor",
    ]
    d0 = rows[0]
    assert d0.input_ids == [1, 2, 3, 4, 5]
    assert d0.loss_mask == [0, 0, 0, 1, 1]
    assert d0.advantages == [0.0, 0.0, 0.0, 1.5, 1.5]
    assert d0.old_logprobs == [0.0, 0.0, 0.0, -0.5, -0.5]
    # both calls of execution (0, 0) carry that run's advantage
    assert rows[1].input_ids == [6, 7, 8] and rows[1].advantages == [0.0, 0.0, 0.7]
    assert rows[2].input_ids == [9, 10, 11, 12] and rows[2].loss_mask == [0, 1, 1, 1]
    assert rows[2].advantages == [0.0, 0.7, 0.7, 0.7]
    assert rows[2].old_logprobs == [0.0, -0.25, -0.25, -0.25]
    assert rows[3].advantages == [0.0, 0.0, -0.3, -0.3]
    assert rows[4].advantages == [0.0, -1.5, -1.5, -1.5]
    assert rows[5].advantages == [0.0, 0.0, 0.0, 0.1]
    assert rows[2].meta == {"episode": 0, "execution": 0, "call": 1, "task_id": "t0"}


def test_inactive_role_contributes_no_tokens():
    ex_only = rows_from_episodes(episodes(), {}, EADV, {"executor"})
    assert {r.role for r in ex_only} == {"executor"} and len(ex_only) == 4
    d_only = rows_from_episodes(episodes(), DADV, {}, {"designer"})
    assert [r.input_ids for r in d_only] == [[1, 2, 3, 4, 5], [20, 21, 22, 23]]
    # executor phase: designer response tokens (4, 5, 21, 22, 23) are nowhere in the loss
    trained = {t for r in ex_only for t, m in zip(r.input_ids, r.loss_mask) if m}
    assert trained == {8, 10, 11, 12, 15, 16, 33}
    assert rows_from_episodes(episodes(), DADV, EADV, set()) == []


def test_bad_calls_fail_loud():
    eps = episodes()
    eps[0].executions[1].calls[0].logprobs = [-0.1]  # 1 logprob for 2 response ids
    with pytest.raises(ValueError, match="episode 0 execution 1 call 0: 1 logprobs for 2"):
        rows_from_episodes(eps, DADV, EADV, {"executor"})
    eps = episodes()
    eps[1].design.call.prompt_ids = []
    with pytest.raises(ValueError, match="episode 1 designer call: prompt_ids is empty"):
        rows_from_episodes(eps, DADV, EADV, {"designer"})
    with pytest.raises(KeyError, match="episode 1, execution 0"):
        rows_from_episodes(episodes(), DADV, {(0, 0): 1.0, (0, 1): 1.0}, {"executor"})
    with pytest.raises(ValueError, match="train_roles"):
        rows_from_episodes(episodes(), DADV, EADV, {"critic"})


def test_render_check_and_empty_responses():
    eps = episodes()
    eps[0].executions[0].calls[0].response_ids = []
    eps[0].executions[0].calls[0].logprobs = []
    rows = rows_from_episodes(eps, DADV, EADV, {"executor"})
    assert len(rows) == 3  # the empty call has nothing to train
    with pytest.raises(ValueError, match="chat template"):
        rows_from_episodes(eps, DADV, EADV, {"designer"}, render=lambda m: [1, 2, 3])


def rows_of(lengths: list[int]) -> list[Row]:
    out = []
    for i, n in enumerate(lengths):
        ids = [100 * i + t + 1 for t in range(n)]
        mask = [0] + [1] * (n - 1)
        out.append(Row(ids, mask, [float(i)] * n, [-0.1 * i] * n, "executor", {"i": i}))
    return out


def test_make_batches_hand_example():
    rows = rows_of([3, 10, 4, 6, 2])
    batches = make_batches(rows, token_budget=12)
    # sorted 10, 6, 4, 3, 2: [10] alone (2*10 > 12); [6, 4] (2*6 = 12); [3, 2] (2*3 = 6)
    assert [tuple(b.input_ids.shape) for b in batches] == [(1, 10), (2, 6), (2, 3)]
    b = batches[1]
    assert b.input_ids[1].tolist() == [201, 202, 203, 204, 0, 0]
    assert b.attention_mask[1].tolist() == [1, 1, 1, 1, 0, 0]
    assert b.position_ids[1].tolist() == [0, 1, 2, 3, 0, 0]
    assert b.loss_mask[1].tolist() == [0, 1, 1, 1, 0, 0]
    assert b.advantages[1].tolist() == [2.0, 2.0, 2.0, 2.0, 0.0, 0.0]
    assert b.num_tokens == 5 + 3 and b.real_tokens == 10


def test_budget_respected_no_token_lost_padding_local():
    rng = random.Random(0)
    lengths = [rng.randint(5, 300) for _ in range(40)] + [700]
    rows = rows_of(lengths)
    budget = 512
    batches = make_batches(rows, budget)
    seen = []
    for b in batches:
        n, width = b.input_ids.shape
        assert n * width <= budget or n == 1  # only a lone over-long row exceeds it
        lens = b.attention_mask.sum(1).tolist()
        assert max(lens) == width  # padded only to this micro-batch's longest row
        for k in range(n):
            seen.append(b.input_ids[k, : lens[k]].tolist())
            assert b.input_ids[k, lens[k] :].eq(0).all() and b.loss_mask[k, lens[k] :].eq(0).all()
    assert sorted(seen) == sorted(r.input_ids for r in rows)
    assert sum(b.num_tokens for b in batches) == sum(sum(r.loss_mask) for r in rows)
    widths = [b.input_ids.shape[1] for b in batches]
    assert widths == sorted(widths, reverse=True)


def test_collate_pad_to_and_errors():
    b = collate(rows_of([2, 3]), pad_to=5)
    assert b.input_ids.tolist() == [[1, 2, 0, 0, 0], [101, 102, 103, 0, 0]]
    with pytest.raises(ValueError, match="pad_to"):
        collate(rows_of([4]), pad_to=3)
    with pytest.raises(ValueError, match="token_budget"):
        make_batches(rows_of([2]), 0)
    assert make_batches([], 10) == []
    assert b.to("cpu").input_ids.dtype == torch.long
