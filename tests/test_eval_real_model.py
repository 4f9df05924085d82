"""A tiny real-model eval: the embedded model answers a few generated tasks as a single agent
and as a designed MAS; rows carry real token counts and the table is written."""

from __future__ import annotations

import pytest

from metaagentx.config import load_config


@pytest.fixture(scope="module")
def generator():
    from metaagentx.backends import load_generator

    cfg = load_config(None, ["--model.device=cpu"])
    return load_generator(cfg)


@pytest.mark.slow
def test_embedded_model_eval_on_generated_tasks(generator, tmp_path):
    from metaagentx.eval import run_eval

    cfg = load_config(
        None,
        [
            "--generation.executor_max_tokens=24",
            "--generation.designer_max_tokens=48",
            "--mas.max_calls=2",
            "--mas.timeout_s=400",
        ],
    )
    rows = run_eval(
        cfg,
        generator,
        benchmarks=["generated:arith"],
        mode="single",
        out_dir=tmp_path,
        label="sa",
        limit=2,
        temperature=0.0,
        progress=False,
    )
    assert len(rows) == 2
    for r in rows:
        assert r["calls"] == 1 and r["tokens_in"] > 20 and 0 < r["tokens_out"] <= 24
        assert r["reward"] in (0.0, 1.0) and r["structure"] == "single"
        assert r["exchanges"][0]["agent"] == "solver" and r["exchanges"][0]["text"]
    table = (tmp_path / "eval" / "sa" / "table.md").read_text()
    assert "| sa |" in table and "generated:arith" in table
    designed = run_eval(
        cfg,
        generator,
        benchmarks=["generated:arith"],
        mode="designed",
        out_dir=tmp_path,
        label="designed",
        limit=1,
        temperature=0.0,
        progress=False,
    )
    assert designed[0]["exchanges"][0]["role"] == "designer"
    assert designed[0]["tokens_out"] > 0 and designed[0]["outcome"] in (
        "submitted",
        "rejected",
        "no_answer",
        "runtime_error",
        "budget_exceeded",
        "timeout",
    )
