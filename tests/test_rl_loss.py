"""GRPO loss and token logprobs against hand-computed values."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

from metaagentx.rl.loss import grpo_loss, token_logprobs
from metaagentx.rl.packing import Row, collate
from tiny_models import tiny_llama

CL, CH = 0.2, 0.28


def leaf(values) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float32, requires_grad=True)


def test_ratio_one_is_plain_policy_gradient():
    lp = leaf([[0.0, -1.0, -2.0, -0.5], [0.0, -0.3, -0.7, 0.0]])
    old = lp.detach().clone()
    adv = torch.tensor([[0.0, 2.0, 2.0, 2.0], [0.0, -1.0, -1.0, 0.0]])
    mask = torch.tensor([[0, 1, 1, 1], [0, 1, 1, 0]], dtype=torch.float32)
    loss, m = grpo_loss(lp, old, adv, mask, clip_low=CL, clip_high=CH)
    loss.backward()
    # 5 masked tokens: loss = -(2 + 2 + 2 - 1 - 1) / 5; d loss / d logp = -A / 5 on the mask
    assert loss.item() == pytest.approx(-4 / 5)
    assert torch.allclose(lp.grad, -adv * mask / 5)
    assert lp.grad[0, 0] == 0 and lp.grad[1, 3] == 0
    assert m["clip_frac"] == 0.0 and m["ratio_mean"] == pytest.approx(1.0)
    assert m["kl"] == 0.0 and m["tokens"] == 5.0
    # gradient accumulation: normalise by the whole step's token count
    lp.grad = None
    loss, _ = grpo_loss(lp, old, adv, mask, clip_low=CL, clip_high=CH, num_tokens=20)
    loss.backward()
    assert torch.allclose(lp.grad, -adv * mask / 20)


def test_clipping_at_the_bounds():
    d = 0.5  # log ratio; r = e^0.5 = 1.6487 > 1.28 and e^-0.5 = 0.6065 < 0.8
    old = torch.zeros(1, 4)
    lp = leaf([[d, -d, d, -d]])
    adv = torch.tensor([[1.0, -1.0, -1.0, 1.0]])
    mask = torch.ones(1, 4)
    loss, m = grpo_loss(lp, old, adv, mask, clip_low=CL, clip_high=CH)
    loss.backward()
    up, down = math.exp(d), math.exp(-d)
    # token 0: A>0, r above 1+ch -> clipped (-1.28), zero grad
    # token 1: A<0, r below 1-cl -> clipped (+0.8), zero grad
    # token 2: A<0, r above -> unclipped: -(r * -1) = r, grad r / 4
    # token 3: A>0, r below -> unclipped: -r, grad -r / 4
    assert loss.item() == pytest.approx((-1.28 + 0.8 + up - down) / 4, abs=1e-6)
    expected = torch.tensor([[0.0, 0.0, up / 4, -down / 4]])
    assert torch.allclose(lp.grad, expected, atol=1e-6)
    assert m["clip_frac"] == 0.5
    assert m["ratio_max"] == pytest.approx(up) and m["ratio_min"] == pytest.approx(down)
    # inside the range nothing is clipped: r = e^0.1 = 1.105 < 1.28
    lp2 = leaf([[0.1]])
    loss2, m2 = grpo_loss(
        lp2, torch.zeros(1, 1), torch.ones(1, 1), torch.ones(1, 1), clip_low=CL, clip_high=CH
    )
    loss2.backward()
    assert lp2.grad.item() == pytest.approx(-math.exp(0.1)) and m2["clip_frac"] == 0.0


def test_seq_mean_vs_token_mean():
    lp = leaf([[0.0, -1.0, 0.0, 0.0], [0.0, -1.0, -1.0, -1.0]])
    old = lp.detach().clone()
    adv = torch.tensor([[0.0, 3.0, 0.0, 0.0], [0.0, 1.0, 1.0, 1.0]])
    mask = torch.tensor([[0, 1, 0, 0], [0, 1, 1, 1]], dtype=torch.float32)
    tok, _ = grpo_loss(lp, old, adv, mask, clip_low=CL, clip_high=CH)
    seq, _ = grpo_loss(lp, old, adv, mask, clip_low=CL, clip_high=CH, agg="seq_mean")
    assert tok.item() == pytest.approx(-(3 + 1 + 1 + 1) / 4)  # -1.5
    assert seq.item() == pytest.approx(-(3 / 1 + 3 / 3) / 2)  # -2.0
    seq.backward()
    # seq_mean: each row's tokens weigh 1 / (rows * row tokens)
    assert torch.allclose(lp.grad, torch.tensor([[0, -1.5, 0, 0], [0, -1 / 6, -1 / 6, -1 / 6]]))
    # accumulation over micro-batches: num_tokens counts the step's sequences under seq_mean
    lp.grad = None
    seq4, _ = grpo_loss(lp, old, adv, mask, clip_low=CL, clip_high=CH, agg="seq_mean", num_tokens=4)
    assert seq4.item() == pytest.approx(-(3 + 1) / 4)
    with pytest.raises(ValueError, match="agg"):
        grpo_loss(lp, old, adv, mask, clip_low=CL, clip_high=CH, agg="sum")


def test_kl_k3():
    lp = leaf([[0.0, -1.0, -2.0]])
    mask = torch.tensor([[0.0, 1.0, 1.0]])
    zero = torch.zeros(1, 3)
    _, m = grpo_loss(
        lp,
        lp.detach(),
        zero,
        mask,
        clip_low=CL,
        clip_high=CH,
        ref_logprobs=lp.detach().clone(),
        kl_coef=0.1,
    )
    assert m["kl"] == 0.0
    ref = torch.tensor([[0.0, -0.5, -2.0]])  # ref - logp = 0.5 on token 1, 0 on token 2
    loss, m = grpo_loss(
        lp, lp.detach(), zero, mask, clip_low=CL, clip_high=CH, ref_logprobs=ref, kl_coef=0.1
    )
    k3 = math.exp(0.5) - 0.5 - 1  # 0.148721
    assert m["kl"] == pytest.approx(k3 / 2, abs=1e-6)
    assert loss.item() == pytest.approx(0.1 * k3 / 2, abs=1e-6)
    loss.backward()  # d k3 / d logp = 1 - exp(ref - logp)
    assert lp.grad[0, 1].item() == pytest.approx(0.1 * (1 - math.exp(0.5)) / 2, abs=1e-6)
    assert lp.grad[0, 2].item() == pytest.approx(0.0, abs=1e-7)


def test_empty_mask_and_entropy_metric():
    lp = leaf([[0.0, -1.0]])
    loss, m = grpo_loss(
        lp,
        lp.detach(),
        torch.ones(1, 2),
        torch.zeros(1, 2),
        clip_low=CL,
        clip_high=CH,
        entropy=torch.tensor([[9.0, 2.0]]),
    )
    loss.backward()
    assert loss.item() == 0.0 and m["tokens"] == 0.0 and m["entropy"] == 0.0
    _, m = grpo_loss(
        lp,
        lp.detach(),
        torch.ones(1, 2),
        torch.tensor([[0.0, 1.0]]),
        clip_low=CL,
        clip_high=CH,
        entropy=torch.tensor([[9.0, 2.0]]),
    )
    assert m["entropy"] == 2.0


class Bigram(torch.nn.Module):
    """A real (tiny) language model: next-token logits depend on the current token only."""

    def __init__(self, table: torch.Tensor):
        super().__init__()
        self.table = torch.nn.Parameter(table)

    def forward(self, input_ids, **kwargs):
        return SimpleNamespace(logits=self.table[input_ids])


def test_token_logprobs_alignment_and_temperature():
    table = torch.log(torch.tensor([[0.5, 0.25, 0.25], [0.1, 0.1, 0.8], [1 / 3, 1 / 3, 1 / 3]]))
    model = Bigram(table)
    rows = [
        Row([0, 2, 1], [0, 1, 1], [0.0] * 3, [0.0] * 3, "executor"),
        Row([1, 2], [0, 1], [0.0] * 2, [0.0] * 2, "executor"),
    ]
    batch = collate(rows)
    lp, ent = token_logprobs(model, batch)
    # row 0: p(2 | 0) = 0.25, p(1 | 2) = 1/3; row 1: p(2 | 1) = 0.8
    assert lp[0].tolist() == pytest.approx([0.0, math.log(0.25), math.log(1 / 3)])
    assert lp[1, :2].tolist() == pytest.approx([0.0, math.log(0.8)])
    h0 = -(0.5 * math.log(0.5) + 2 * 0.25 * math.log(0.25))  # entropy of row "0"
    assert ent[0].tolist() == pytest.approx([0.0, h0, math.log(3)], abs=1e-6)
    # temperature 2: log_softmax(log p / 2) = log(sqrt p / sum sqrt p)
    lp2, _ = token_logprobs(model, batch, temperature=2.0)
    s = math.sqrt(0.5) + 2 * math.sqrt(0.25)
    assert lp2[0, 1].item() == pytest.approx(math.log(math.sqrt(0.25) / s))
    lp0, _ = token_logprobs(model, batch, temperature=0.0)
    assert torch.allclose(lp0, lp)
    lp[0, 1].backward()
    assert model.table.grad is not None and model.table.grad[0].abs().sum() > 0


def test_token_logprobs_tiny_llama_padding_invariant():
    torch.manual_seed(0)
    model = tiny_llama(64, 64).eval()
    a, b = [5, 9, 13, 2, 7, 30], [11, 3, 60]
    rows = [Row(x, [1] * len(x), [0.0] * len(x), [0.0] * len(x), "executor") for x in (a, b)]
    with torch.no_grad():
        lp, _ = token_logprobs(model, collate(rows), temperature=0.7)
        # the logprob at t is the prefix's next-token distribution evaluated at token t
        for k, ids in enumerate((a, b)):
            for t in range(1, len(ids)):
                logits = model(torch.tensor([ids[:t]])).logits[0, -1] / 0.7
                want = torch.log_softmax(logits, -1)[ids[t]].item()
                assert lp[k, t].item() == pytest.approx(want, abs=1e-5)


def test_head_on_loss_positions_matches_full_logits():
    torch.manual_seed(1)
    model = tiny_llama(64, 64, tie_word_embeddings=True)
    rows = [
        Row([5, 9, 13, 2, 7], [0, 0, 1, 1, 1], [0.0] * 5, [0.0] * 5, "executor"),
        Row([11, 3, 60], [0, 0, 1], [0.0] * 3, [0.0] * 3, "executor"),
    ]
    batch = collate(rows)
    grads = []
    outs = []
    for full in (True, False):
        model.zero_grad()
        lp, ent = token_logprobs(model, batch, temperature=0.8, full=full)
        (lp * batch.loss_mask).sum().backward()
        outs.append((lp * batch.loss_mask, ent * batch.loss_mask))
        grads.append([p.grad.clone() for p in model.parameters()])
    assert torch.allclose(outs[0][0], outs[1][0], atol=1e-5)
    assert torch.allclose(outs[0][1], outs[1][1], atol=1e-5)
    assert outs[1][0][0, :2].eq(0).all() and outs[1][0][0, 2] < 0  # prompt positions hold 0
    for g_full, g_head in zip(*grads):
        assert torch.allclose(g_full, g_head, atol=1e-5)
