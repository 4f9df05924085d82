"""The demo pipeline end to end on a tiny random Llama (real tokenizer) with scripted replies:
held-out eval -> demonstrations -> SFT -> stagewise RL -> eval of the RL policy."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch

from metaagentx.config import load_config
from tiny_models import tiny_llama

DESIGN = "```python\nsolver = Agent('solver', 'Solve it.')\nsubmit(single(solver, QUESTION))\n```"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from transformers import AutoTokenizer

    from metaagentx.backends.models import embedded_model_dir

    tok = AutoTokenizer.from_pretrained(embedded_model_dir())
    torch.manual_seed(0)
    model = tiny_llama(len(tok), 2048, eos_token_id=tok.eos_token_id)
    folder = tmp_path_factory.mktemp("tiny") / "tiny-llama"
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder, tok


def reply(messages) -> str:
    """Designer: a valid single-agent script; critics approve; agents right on even sums."""
    if any(m["content"].startswith("Design a team") for m in messages if m["role"] == "user"):
        return DESIGN
    if "reviewer" in messages[0]["content"]:
        return "CORRECT"
    user = next(m["content"] for m in messages if m["role"] == "user")
    a, b = map(int, re.search(r"(\d) \+ (\d)", user).groups())
    return f"\\boxed{{{a + b if (a + b) % 2 == 0 else a + b + 1}}}"


def test_demo_pipeline_runs_every_stage(tiny, tmp_path):
    from metaagentx.backends.scripted import ScriptedGenerator
    from metaagentx.pipeline import held_out_tasks, run_demo
    from metaagentx.tasks.datasets import load_tasks

    folder, tok = tiny
    cfg = load_config(
        None,
        [
            f"--model.name={folder}",
            "--model.device=cpu",
            "--data.train=generated:arith",
            "--data.eval=generated:arith",
            "--data.train_limit=20",
            "--data.eval_limit=4",
            "--sft.tasks=4",
            "--sft.samples_per_task=2",
            "--sft.lr=1e-3",
            "--generation.designer_max_tokens=256",
            "--rollout.m=1",
            "--rollout.n=2",
            "--rollout.tasks_per_step=2",
            "--rl.steps=2",
            "--rl.k=1",
            "--rl.save_every=1",
            "--mas.timeout_s=60",
            f"--run.out_dir={tmp_path / 'demo'}",
        ],
    )
    heldout = held_out_tasks(cfg)
    train_prompts = {t.prompt for t in load_tasks("generated:arith", limit=20, seed=0)}
    assert len(heldout) == 4 and not train_prompts & {t.prompt for t in heldout}
    results = run_demo(
        cfg, progress=False, generator_factory=lambda model, t: ScriptedGenerator(reply, tok)
    )
    even = sum(int(t.answer) % 2 == 0 for t in heldout) / 4
    for key in ("start", "sft_eval", "rl_eval"):
        assert results[key]["items"] == 4 and results[key]["validity"] == 1.0
        assert results[key]["accuracy"] == even
    out = Path(cfg.run.out_dir)
    assert results["demonstrations"]["designer_examples"] > 0
    assert results["sft"]["steps"] >= 1 and (out / "sft" / "model" / "config.json").is_file()
    rl_rows = [json.loads(x) for x in (out / "rl" / "metrics.jsonl").read_text().splitlines()]
    assert [r["phase"] for r in rl_rows] == ["executor", "designer"]
    assert json.loads((out / "demo.json").read_text())["rl_eval"]["items"] == 4
    md = (out / "demo.md").read_text()
    assert "| start |" in md and "| after SFT |" in md and "| after RL |" in md
