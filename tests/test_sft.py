"""SFT: assistant-only loss mask on a real tokenizer, a step that changes a tiny model's
parameters, the saved folder loading like any model, resume, and the RL trainer starting
from an SFT checkpoint."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch

from metaagentx.config import load_config

MESSAGES = [
    {"role": "system", "content": "You are a careful math solver."},
    {"role": "user", "content": "What is 2 + 3?"},
    {"role": "assistant", "content": "2 + 3 = 5. The answer is \\boxed{5}."},
]


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    from metaagentx.backends.models import embedded_model_dir

    return AutoTokenizer.from_pretrained(embedded_model_dir())


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory, tokenizer) -> Path:
    """A tiny random Llama with the embedded model's real tokenizer, saved as a folder."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=tokenizer.bos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    folder = tmp_path_factory.mktemp("tiny") / "tiny-llama"
    LlamaForCausalLM(cfg).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def _write_demos(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    designer = {
        "messages": [
            {"role": "system", "content": "Design a team."},
            {"role": "user", "content": "What is 1 + 1?"},
            {"role": "assistant", "content": "```python\nsubmit('2')\n```"},
        ],
        "provenance": {"teacher": "policy", "structure": "single", "task_id": "t0", "reward": 1.0},
    }
    executor = {
        "messages": MESSAGES,
        "provenance": {"teacher": "policy", "task_id": "t1", "structure": "single", "reward": 1.0},
    }
    (folder / "designer.jsonl").write_text(json.dumps(designer) + "\n")
    (folder / "executor.jsonl").write_text((json.dumps(executor) + "\n") * 3)


def test_mask_covers_exactly_the_assistant_tokens(tokenizer):
    from metaagentx.backends.text import render_chat
    from metaagentx.sft import tokenize_example

    ids, mask = tokenize_example(tokenizer, MESSAGES)
    prompt = [t for t, m in zip(ids, mask) if m == 0]
    response = [t for t, m in zip(ids, mask) if m == 1]
    # The prompt is exactly what a generator renders (generation prompt included) ...
    assert prompt == render_chat(tokenizer, MESSAGES[:-1])
    assert ids[: len(prompt)] == prompt and mask == [0] * len(prompt) + [1] * len(response)
    # ... and the trained tokens are the assistant's text followed by the end-of-turn token.
    assert tokenizer.decode(response) == MESSAGES[-1]["content"] + "<|im_end|>"
    assert response[-1] == tokenizer.eos_token_id
    # The whole row is the chat template of the full conversation (minus its trailing newline).
    full = tokenizer.apply_chat_template(MESSAGES, tokenize=False)
    assert tokenizer.decode(ids) == full.rstrip("\n")
    # A reply cut at max_new_tokens is trained without an end-of-turn token.
    cut_ids, cut_mask = tokenize_example(tokenizer, MESSAGES, ended=False)
    assert cut_ids == ids[:-1] and cut_mask == mask[:-1]


def test_sft_loss_is_the_mean_nll_of_assistant_tokens_only(tiny_dir, tokenizer):
    from transformers import AutoModelForCausalLM

    from metaagentx.rl.packing import make_batches
    from metaagentx.sft import build_rows, sft_loss

    model = AutoModelForCausalLM.from_pretrained(tiny_dir).eval()
    rows = build_rows(tokenizer, [{"messages": MESSAGES, "role": "executor"}], max_tokens=4096)
    (batch,) = make_batches(rows, 4096)
    loss, n = sft_loss(model, batch)
    ids = torch.tensor([rows[0].input_ids])
    logp = torch.log_softmax(model(input_ids=ids).logits[0, :-1].float(), -1)
    per_token = logp.gather(-1, ids[0, 1:, None])[:, 0]
    mask = torch.tensor(rows[0].loss_mask[1:], dtype=torch.bool)
    assert n == sum(rows[0].loss_mask) == int(mask.sum())
    assert torch.allclose(loss, -per_token[mask].mean(), atol=1e-5)
    assert not torch.allclose(loss, -per_token.mean(), atol=1e-3)  # prompt tokens excluded


def _cfg(tiny_dir: Path, *extra: str):
    return load_config(
        None,
        [
            f"--model.name={tiny_dir}",
            "--model.device=cpu",
            "--sft.lr=1e-2",
            "--sft.epochs=2",
            "--sft.batch_tokens=256",
            "--rl.save_every=1",
            *extra,
        ],
    )


def test_sft_step_changes_parameters_and_saves_a_loadable_model(tiny_dir, tmp_path):
    from metaagentx.backends.models import load_model_and_tokenizer
    from metaagentx.rl.checkpoint import latest_checkpoint
    from metaagentx.sft import train_sft

    _write_demos(tmp_path / "data")
    info = train_sft(_cfg(tiny_dir), tmp_path / "data", tmp_path / "sft", progress=False)
    before, _ = load_model_and_tokenizer(str(tiny_dir))
    after, tok = load_model_and_tokenizer(info["model_dir"])
    assert info["examples"] == 4 and info["steps"] >= 2
    changed = [
        n
        for (n, p), q in zip(before.named_parameters(), after.parameters())
        if not torch.equal(p, q)
    ]
    assert len(changed) == len(list(before.parameters()))
    assert info["last_loss"] < info["first_loss"]
    rows = [json.loads(x) for x in (tmp_path / "sft" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == list(range(1, info["steps"] + 1))
    assert all(r["phase"] == "sft" and r["tokens"] > 0 for r in rows)
    assert latest_checkpoint(tmp_path / "sft").name == f"step_{info['steps']:06d}"
    assert tok.eos_token_id == after.config.eos_token_id


def test_sft_resume_continues_to_the_same_weights(tiny_dir, tmp_path):
    from metaagentx.backends.models import load_model_and_tokenizer
    from metaagentx.rl.checkpoint import latest_checkpoint
    from metaagentx.sft import train_sft

    _write_demos(tmp_path / "data")
    full = train_sft(_cfg(tiny_dir), tmp_path / "data", tmp_path / "a", progress=False)
    # Interrupted run: stop after the first epoch, then resume to the full length.
    train_sft(_cfg(tiny_dir, "--sft.epochs=1"), tmp_path / "data", tmp_path / "b", progress=False)
    half = latest_checkpoint(tmp_path / "b").name
    resumed = train_sft(
        _cfg(tiny_dir), tmp_path / "data", tmp_path / "b", resume=True, progress=False
    )
    assert half != latest_checkpoint(tmp_path / "b").name
    assert resumed["steps"] == full["steps"]
    a, _ = load_model_and_tokenizer(full["model_dir"])
    b, _ = load_model_and_tokenizer(resumed["model_dir"])
    for p, q in zip(a.parameters(), b.parameters()):
        assert torch.allclose(p, q, atol=1e-6)


def test_bad_example_file_names_file_and_line(tmp_path):
    from metaagentx.sft import load_examples

    (tmp_path / "designer.jsonl").write_text('{"messages": []}\n{"nope": 1}\n')
    with pytest.raises(ValueError, match=r"designer.jsonl:2: field 'messages'"):
        load_examples(tmp_path)
    with pytest.raises(FileNotFoundError, match="sft-data"):
        load_examples(tmp_path / "missing")


def test_rl_trainer_starts_from_the_sft_model_folder(tiny_dir, tmp_path, tokenizer):
    """``--model.name=<sft>/model`` works: the trainer loads the folder and trains from it."""
    from metaagentx.backends.models import load_model_and_tokenizer
    from metaagentx.backends.scripted import ScriptedGenerator
    from metaagentx.rl.checkpoint import latest_checkpoint, load_checkpoint
    from metaagentx.rl.trainer import train
    from metaagentx.sft import train_sft

    _write_demos(tmp_path / "data")
    info = train_sft(
        _cfg(tiny_dir, "--sft.epochs=1"), tmp_path / "data", tmp_path / "sft", progress=False
    )
    served: dict[str, int] = {}

    def alternate(messages) -> str:  # per prompt: right, then wrong: each task gets both
        text = messages[-1]["content"]
        served[text] = served.get(text, 0) + 1
        a, b = map(int, re.search(r"(\d) \+ (\d)", text).groups())
        return f"The answer is \\boxed{{{a + b + (served[text] + 1) % 2}}}."

    cfg = load_config(
        None,
        [
            f"--model.name={info['model_dir']}",
            "--model.device=cpu",
            "--rollout.mode=fixed:single",
            "--rollout.m=1",
            "--rollout.n=2",
            "--rollout.tasks_per_step=2",
            "--rl.steps=1",
            "--rl.schedule=executor_only",
            "--rl.lr=1e-2",
            "--data.train=generated:arith",
            "--data.train_limit=4",
            f"--run.out_dir={tmp_path / 'rl'}",
            "--mas.timeout_s=60",
        ],
    )
    out = train(cfg, generator=ScriptedGenerator(alternate, tokenizer))
    assert (out / "config.toml").read_text().count(info["model_dir"]) == 1
    sft_model, _ = load_model_and_tokenizer(info["model_dir"])
    rl_model, _ = load_model_and_tokenizer(info["model_dir"])
    load_checkpoint(latest_checkpoint(out), model=rl_model, restore_rng=False)
    assert json.loads((out / "metrics.jsonl").read_text())["reward_mean"] == 0.5
    diffs = [not torch.equal(p, q) for p, q in zip(sft_model.parameters(), rl_model.parameters())]
    assert any(diffs)  # RL stepped away from the SFT weights it started from
    # eval --model <run folder> serves the run's newest checkpoint as a model folder.
    from metaagentx.sft import resolve_model

    exported, _ = load_model_and_tokenizer(resolve_model(str(out)))
    assert all(torch.equal(p, q) for p, q in zip(exported.parameters(), rl_model.parameters()))
    assert resolve_model(info["model_dir"]) == info["model_dir"]


def test_baseline_configs_load_and_say_what_they_are():
    from metaagentx.config import load_config

    root = Path(__file__).resolve().parents[1] / "configs" / "baselines"
    cfgs = {p.stem: load_config(p) for p in root.glob("*.toml")}
    assert set(cfgs) == {"sa", "sa-grpo", "fixed-templates", "designer-only", "metaagentx"}
    g = cfgs["sa-grpo"]
    assert (g.rollout.mode, g.rollout.m, g.rl.schedule) == ("fixed:single", 1, "executor_only")
    d = cfgs["designer-only"]
    assert (d.rl.schedule, d.rl.policy) == ("designer_only", "separate")
    assert cfgs["metaagentx"].rl.schedule == "stagewise"
    for p in root.glob("*.toml"):
        assert "metaagentx eval" in p.read_text()  # each says how it is evaluated


def test_cli_sft_data_then_sft(tiny_dir, tmp_path, capsys):
    """The two commands chained: template demonstrations (scripted policy), then SFT."""
    from metaagentx.cli import main

    data = tmp_path / "data"
    assert (
        main(
            [
                "sft-data",
                "--out",
                str(data),
                "--no-progress",
                "--sft.tasks=3",
                "--sft.samples_per_task=1",
                "--generation.backend=scripted",
                "--data.train=generated:arith",
                "--mas.timeout_s=60",
                "--generation.designer_max_tokens=4096",
            ]
        )
        == 0
    )
    stats = json.loads((data / "stats.json").read_text())
    assert stats["mode"] == "templates" and stats["designs"] == 3 and stats["tasks"] == 3
    assert len((data / "executor.jsonl").read_text().splitlines()) == stats["executor_examples"]
    assert "acceptance:" in capsys.readouterr().out
    _write_demos(data)  # the echoing policy is rarely right: train on known examples
    assert (
        main(
            [
                "sft",
                "--data",
                str(data),
                "--out",
                str(tmp_path / "sft"),
                "--no-progress",
                f"--model.name={tiny_dir}",
                "--model.device=cpu",
            ]
        )
        == 0
    )
    assert "--model.name=" in capsys.readouterr().out
    assert (tmp_path / "sft" / "model" / "config.json").is_file()
