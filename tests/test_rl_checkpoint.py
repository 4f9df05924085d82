"""Checkpoint round trip (weights, optimizer, scheduler, RNG), pruning, atomicity; optimizer."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
import torch

from metaagentx.rl.checkpoint import latest_checkpoint, load_checkpoint, save_checkpoint
from metaagentx.rl.optim import build_optimizer, lr_multiplier


def tiny_llama() -> torch.nn.Module:
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(
        vocab_size=48,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=32,
        tie_word_embeddings=True,
    )
    return LlamaForCausalLM(cfg)


def train_step(model, opt, sched) -> None:
    ids = torch.randint(0, 48, (2, 6))  # draws from the torch RNG, like dropout/sampling would
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    opt.step()
    sched.step()
    opt.zero_grad(set_to_none=True)


def draws() -> tuple:
    return random.random(), float(np.random.rand()), torch.rand(3).tolist()


def snapshot(model) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def test_round_trip_resumes_exactly(tmp_path):
    torch.manual_seed(0)
    model = tiny_llama()
    opt, sched = build_optimizer(model, 1e-2, 0.1, warmup_steps=3, total_steps=10)
    for _ in range(2):
        train_step(model, opt, sched)
    state = {"phase": "executor", "data_pos": 7}
    path = save_checkpoint(
        tmp_path / "checkpoints" / "step_000002",
        model=model,
        optimizer=opt,
        scheduler=sched,
        step=2,
        state=state,
    )
    saved = snapshot(model)
    lr_saved = opt.param_groups[0]["lr"]
    after_save = draws()
    train_step(model, opt, sched)  # the uninterrupted continuation
    continued = snapshot(model)
    train_step(model, opt, sched)  # perturb further: weights, moments, lr, RNG all move on
    assert not torch.equal(model.lm_head.weight, saved["lm_head.weight"])

    fresh = tiny_llama()  # a new process would build a new model and optimizer
    opt2, sched2 = build_optimizer(fresh, 1e-2, 0.1, warmup_steps=3, total_steps=10)
    assert latest_checkpoint(tmp_path) == path
    step, got = load_checkpoint(path, model=fresh, optimizer=opt2, scheduler=sched2)
    assert (step, got) == (2, state)
    for k, v in saved.items():
        assert torch.equal(fresh.state_dict()[k], v), k
    assert fresh.lm_head.weight.data_ptr() == fresh.model.embed_tokens.weight.data_ptr()
    assert opt2.param_groups[0]["lr"] == lr_saved and sched2.last_epoch == 2
    assert draws() == after_save  # python, numpy and torch streams resume identically
    # the same next step (same batch from the resumed RNG): identical parameters
    train_step(fresh, opt2, sched2)
    for k, v in continued.items():
        assert torch.equal(fresh.state_dict()[k], v), k


def test_keep_newest_and_ignore_incomplete(tmp_path):
    model = torch.nn.Linear(3, 2)
    opt, sched = build_optimizer(model, 1e-3, 0.0, 0, 10)
    root = tmp_path / "checkpoints"
    for s in (1, 2, 3):
        save_checkpoint(
            root / f"step_{s:06d}",
            model=model,
            optimizer=opt,
            scheduler=sched,
            step=s,
            state={"s": s},
            keep=2,
        )
    assert sorted(p.name for p in root.iterdir()) == ["step_000002", "step_000003"]
    (root / "step_000009").mkdir()  # a save killed before meta.json: not a checkpoint
    (root / ".tmp-step_000010-1").mkdir()
    assert latest_checkpoint(tmp_path) == root / "step_000003"
    with pytest.raises(FileNotFoundError, match="meta.json"):
        load_checkpoint(root / "step_000009", model=model)
    # saving over an existing step replaces it
    save_checkpoint(
        root / "step_000003",
        model=model,
        optimizer=opt,
        scheduler=sched,
        step=3,
        state={"s": "again"},
        keep=2,
    )
    assert json.loads((root / "step_000003" / "meta.json").read_text())["state"] == {"s": "again"}
    assert latest_checkpoint(tmp_path / "nowhere") is None


def test_state_must_be_json(tmp_path):
    model = torch.nn.Linear(2, 2)
    with pytest.raises(TypeError, match="JSON"):
        save_checkpoint(
            tmp_path / "step_000001",
            model=model,
            optimizer=None,
            scheduler=None,
            step=1,
            state={"bad": object()},
        )
    assert not any(tmp_path.iterdir())  # nothing half-written


def test_lr_schedule_and_param_groups():
    warm = lr_multiplier(4, 10)
    assert [warm(s) for s in range(6)] == [0.25, 0.5, 0.75, 1.0, 1.0, 1.0]
    cos = lr_multiplier(2, 6, "cosine")
    # after 2 warmup steps, cosine over 4 steps: 1, cos^2(pi/8)..., 0 at the end
    assert [round(cos(s), 4) for s in range(7)] == [0.5, 1.0, 1.0, 0.8536, 0.5, 0.1464, 0.0]
    model = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.LayerNorm(3))
    opt, sched = build_optimizer(model, 0.1, 0.01, warmup_steps=2, total_steps=5)
    decays = sorted((g["weight_decay"], len(g["params"])) for g in opt.param_groups)
    assert decays == [(0.0, 3), (0.01, 1)]  # only the Linear weight is decayed
    assert opt.param_groups[0]["lr"] == pytest.approx(0.05)  # first step: half the peak
    opt.step()
    sched.step()
    assert opt.param_groups[0]["lr"] == pytest.approx(0.1)
    with pytest.raises(ValueError, match="decay"):
        lr_multiplier(0, 1, "linear")
