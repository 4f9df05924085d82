"""The trainer on a real (tiny, random) Llama model with the scripted backend: a step changes
the weights, the inactive role contributes no gradient, separate policies step only the active
model, and a killed run resumed from its checkpoint matches an uninterrupted one exactly."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
import torch

from metaagentx.backends.models import load_model_and_tokenizer
from metaagentx.backends.scripted import ScriptedGenerator
from metaagentx.config import load_config
from metaagentx.rl.checkpoint import load_checkpoint
from metaagentx.rl.packing import rows_from_episodes
from metaagentx.rl.rollout import rollout_step
from metaagentx.rl.trainer import accumulate_gradients, compute_advantages, train
from metaagentx.tasks.datasets import load_tasks
from test_rl_rollout import CAREFUL, SLOPPY, policy
from tiny_models import tiny_llama

TIMING = ("time_rollout_s", "time_update_s", "tokens_per_s")


def _small_tokenizer():
    """A real Hugging Face fast tokenizer: byte-level BPE (every byte has an id) with ~700
    merges learned from the designer prompt, so prompts stay short, and a ChatML template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from metaagentx.mas.runtime import designer_messages

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    text = designer_messages(load_tasks("generated:arith", limit=1)[0])[0]["content"]
    corpus = [text, CAREFUL, SLOPPY, "What is 1 + 2? \\boxed{3} user assistant system"]
    core.train_from_iterator(
        corpus,
        trainers.BpeTrainer(
            vocab_size=1000,
            special_tokens=specials,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        ),
    )
    tok = PreTrainedTokenizerFast(
        tokenizer_object=core,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=["<|im_start|>"],
    )
    tok.chat_template = (
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
        "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )
    return tok


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A 2-layer random LlamaForCausalLM saved with its tokenizer, as a user would load one."""
    folder = tmp_path_factory.mktemp("tiny-llama")
    tok = _small_tokenizer()
    torch.manual_seed(0)
    model = tiny_llama(
        len(tok),
        4096,
        tie_word_embeddings=False,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def make_cfg(model_dir: Path, out_dir: Path, *extra: str):
    return load_config(
        None,
        [
            f"--model.name={model_dir}",
            "--model.device=cpu",
            "--generation.backend=scripted",
            "--data.train=generated:arith",
            "--data.train_limit=6",
            "--rollout.m=2",
            "--rollout.n=2",
            "--rollout.tasks_per_step=2",
            "--rl.steps=4",
            "--rl.k=2",
            "--rl.lr=1e-3",
            "--rl.token_budget=8192",
            "--rl.save_every=2",
            "--rl.keep_checkpoints=5",
            "--mas.timeout_s=60",
            f"--run.out_dir={out_dir}",
            "--run.seed=7",
            *extra,
        ],
    )


def scripted(tokenizer) -> ScriptedGenerator:
    """Design 0 of every task is the careful team (reward 1), design 1 the sloppy one (0)."""
    return ScriptedGenerator(policy([CAREFUL, SLOPPY]), tokenizer=tokenizer)


def weights(model_dir: Path, ckpt: Path | None = None) -> dict[str, torch.Tensor]:
    model, _ = load_model_and_tokenizer(str(model_dir))
    if ckpt is not None:
        load_checkpoint(ckpt, model=model, restore_rng=False)
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def rows_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_step_trains_and_logs(tiny_model_dir, tmp_path):
    out = tmp_path / "run"
    cfg = make_cfg(tiny_model_dir, out, "--rl.steps=1")
    tok = load_model_and_tokenizer(str(tiny_model_dir))[1]
    train(cfg, generator=scripted(tok))
    before = weights(tiny_model_dir)
    after = weights(tiny_model_dir, out / "checkpoints" / "step_000001")
    changed = [k for k in before if not torch.equal(before[k], after[k])]
    assert changed, "one executor-phase step left every parameter unchanged"
    (row,) = rows_of(out / "metrics.jsonl")
    assert row["step"] == 1 and row["phase"] == "executor"
    # per task: careful runs [1, 1], sloppy runs [0, 0]
    assert row["reward_mean"] == 0.5 and row["accuracy"] == 0.5
    assert row["structure_counts"] == {"single": 4} and row["failures"] == {}
    assert row["adv_designer_mean"] == pytest.approx(0.0)
    assert row["adv_designer_std"] == pytest.approx(1.0, abs=1e-5)
    assert row["adv_executor_std"] == pytest.approx(1.0, abs=1e-5)
    assert row["calls"] == 4 + 8 and row["executions"] == 8
    assert row["trained_tokens"] == row["loss_tokens"] > 0  # executor tokens only
    assert row["lr"] == pytest.approx(1e-3)
    assert len((out / "samples" / "step_000001.jsonl").read_text().splitlines()) == 4
    assert (out / "plots" / "reward.png").stat().st_size > 1000
    assert load_config(out / "config.toml") == cfg


def _grads(model, rows, cfg) -> list[torch.Tensor]:
    model.zero_grad(set_to_none=True)
    units = sum(sum(r.loss_mask) for r in rows)
    accumulate_gradients(model, rows, cfg, "cpu", units=units)
    return [
        p.grad.clone() if p.grad is not None else torch.zeros_like(p) for p in model.parameters()
    ]


def test_inactive_role_contributes_no_gradient(tiny_model_dir, tmp_path):
    cfg = make_cfg(tiny_model_dir, tmp_path)
    model, tok = load_model_and_tokenizer(str(tiny_model_dir))
    model.train()
    tasks = load_tasks("generated:arith", limit=2)
    groups = asyncio.run(rollout_step(tasks, scripted(tok), cfg=cfg))
    episodes = [ep for g in groups for ep in g]
    dadv, eadv = compute_advantages(groups, "task")
    flipped_e = {k: -v for k, v in eadv.items()}
    flipped_d = {k: -v for k, v in dadv.items()}
    for roles, same, other in (
        (({"designer"}), (dadv, flipped_e), (flipped_d, eadv)),
        (({"executor"}), (flipped_d, eadv), (dadv, flipped_e)),
    ):
        base = _grads(model, rows_from_episodes(episodes, dadv, eadv, roles), cfg)
        assert any(g.abs().sum() > 0 for g in base)
        # flipping the inactive role's advantages leaves the gradient exactly unchanged ...
        again = _grads(model, rows_from_episodes(episodes, *same, roles), cfg)
        assert all(torch.equal(a, b) for a, b in zip(base, again))
        # ... while flipping the active role's changes it (the check can fail)
        moved = _grads(model, rows_from_episodes(episodes, *other, roles), cfg)
        assert not all(torch.equal(a, b) for a, b in zip(base, moved))


def test_separate_policies_step_only_the_active_model(tiny_model_dir, tmp_path):
    out = tmp_path / "sep"
    cfg = make_cfg(
        tiny_model_dir, out, "--rl.steps=1", "--rl.policy=separate", "--rl.schedule=designer_only"
    )
    tok = load_model_and_tokenizer(str(tiny_model_dir))[1]
    train(cfg, generator=scripted(tok))
    start = weights(tiny_model_dir)
    executor = weights(tiny_model_dir, out / "checkpoints" / "step_000001")
    designer = weights(tiny_model_dir, out / "designer" / "checkpoints" / "step_000001")
    assert all(torch.equal(start[k], executor[k]) for k in start)
    assert any(not torch.equal(start[k], designer[k]) for k in start)
    (row,) = rows_of(out / "metrics.jsonl")
    assert row["phase"] == "designer" and list(row["grad_norm"]) == ["designer"]
    assert row["lr"] == pytest.approx(1e-3)


class Killed(Exception):
    pass


def test_resume_after_kill_matches_uninterrupted_run(tiny_model_dir, tmp_path):
    tok = load_model_and_tokenizer(str(tiny_model_dir))[1]
    full = train(make_cfg(tiny_model_dir, tmp_path / "full"), generator=scripted(tok))

    def kill_after_3(row):
        if row["step"] == 3:  # step 3's row is written but only step 2 was checkpointed
            raise Killed

    cfg = make_cfg(tiny_model_dir, tmp_path / "killed")
    with pytest.raises(Killed):
        train(cfg, generator=scripted(tok), on_step=kill_after_3)
    assert len(rows_of(cfg_out(cfg) / "metrics.jsonl")) == 3
    resumed = train(cfg, resume=True, generator=scripted(tok))
    a, b = rows_of(full / "metrics.jsonl"), rows_of(resumed / "metrics.jsonl")
    assert [r["step"] for r in b] == [1, 2, 3, 4]
    assert [r["phase"] for r in b] == ["executor", "executor", "designer", "designer"]
    strip = [{k: v for k, v in r.items() if k not in TIMING} for r in a]
    assert strip == [{k: v for k, v in r.items() if k not in TIMING} for r in b]
    wa = weights(tiny_model_dir, full / "checkpoints" / "step_000004")
    wb = weights(tiny_model_dir, resumed / "checkpoints" / "step_000004")
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    assert not all(torch.equal(wa[k], v) for k, v in weights(tiny_model_dir).items())


def cfg_out(cfg) -> Path:
    return Path(cfg.run.out_dir)


def test_phase_spans_and_metrics_truncation(tmp_path):
    from metaagentx.rl.metrics import MetricsWriter, read_metrics
    from metaagentx.rl.plot import phase_spans, plot_reward

    phases = ["executor", "executor", "designer", "designer", "designer", "executor"]
    writer = MetricsWriter(tmp_path)
    for step, phase in enumerate(phases, start=1):
        writer.write({"step": step, "phase": phase, "reward_mean": step / 10})
    assert phase_spans(read_metrics(tmp_path)) == [
        ("executor", 0.5, 2.5),
        ("designer", 2.5, 5.5),
        ("executor", 5.5, 6.5),
    ]
    writer.truncate_after(4)
    assert [r["step"] for r in read_metrics(tmp_path)] == [1, 2, 3, 4]
    assert plot_reward(tmp_path).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_task_stream_resumes_the_same_order():
    from metaagentx.rl.trainer import TaskStream

    tasks = load_tasks("generated:arith", limit=5)
    full = TaskStream(tasks, seed=1)
    seq = [t.id for t in full.take(4) + full.take(4) + full.take(4)]
    assert sorted(seq[:5]) == sorted(t.id for t in tasks)  # each epoch is a permutation
    again = TaskStream(tasks, seed=1, pos=4)
    assert [t.id for t in again.take(8)] == seq[4:]


def test_kl_to_frozen_reference(tiny_model_dir, tmp_path):
    out = tmp_path / "kl"
    cfg = make_cfg(
        tiny_model_dir,
        out,
        "--rl.steps=2",
        "--rl.kl_coef=0.1",
        "--rl.schedule=executor_only",
        "--rollout.tasks_per_step=1",
    )
    tok = load_model_and_tokenizer(str(tiny_model_dir))[1]
    train(cfg, generator=scripted(tok))
    first, second = rows_of(out / "metrics.jsonl")
    assert first["kl"] == 0.0  # the policy still equals its reference
    assert second["kl"] > 0.0  # one step later it has moved away


def test_train_command_with_hf_backend_and_resume(tiny_model_dir, tmp_path):
    from metaagentx.cli import main

    out = tmp_path / "cli"
    args = [
        "train",
        f"--model.name={tiny_model_dir}",
        "--model.device=cpu",
        "--generation.backend=hf",
        "--generation.designer_max_tokens=4",
        "--rollout.m=2",
        "--rollout.n=1",
        "--rollout.tasks_per_step=1",
        "--data.train=generated:arith",
        f"--run.out_dir={out}",
    ]
    assert main([*args, "--rl.steps=1"]) == 0
    (row,) = rows_of(out / "metrics.jsonl")
    # a random model writes no script: both designs are recorded rejections, nothing runs
    assert sum(row["failures"].values()) == 2 and row["executions"] == 2
    assert row["calls"] == 2 and 0 < row["tokens"] <= 8 and row["reward_mean"] == 0.0
    assert main([*args, "--rl.steps=2", "--resume"]) == 0  # extend the finished run
    assert [r["step"] for r in rows_of(out / "metrics.jsonl")] == [1, 2]
    assert load_config(out / "config.toml").rl.steps == 2


def test_missing_tracker_package_is_a_clear_error(tmp_path):
    import importlib.util

    from metaagentx.rl.metrics import MetricsWriter

    if importlib.util.find_spec("tensorboard") is not None:
        pytest.skip("tensorboard is installed")
    with pytest.raises(RuntimeError, match="run.log_tensorboard = true needs the tensorboard"):
        MetricsWriter(tmp_path, tensorboard=True)
