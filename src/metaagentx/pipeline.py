"""The whole method on one machine: demonstrations -> SFT -> stagewise RL -> evaluation.

    metaagentx demo --config configs/cpu-demo.toml          # also: make demo

Stages, all under ``run.out_dir``:

1. ``eval/start``: the starting policy designs and runs a MAS for each held-out task.
2. ``sft-data/``: demonstrations (templates + rejection sampling from the policy, or a teacher
   when ``sft.teacher`` is set), only correct executions kept.
3. ``sft/``: supervised fine-tuning of the same live model; ``sft/model`` is saved.
4. ``eval/sft``: the SFT policy on the same held-out tasks.
5. ``rl/``: stagewise RL (``rl.trainer.train``) starting from ``sft/model``.
6. ``eval/rl``: the RL policy on the same held-out tasks.

Held-out tasks are drawn from ``data.eval`` with seed ``data.seed + 1`` and never share a
prompt with the training tasks. Printed at the end (and saved as ``demo.json`` / ``demo.md``):
accuracy of the start, SFT and RL policies and the designer's script validity rate (designs
that pass the script check and submit an answer) before and after SFT, with wall times.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from metaagentx.config import Config, save_config
from metaagentx.types import Task


def held_out_tasks(cfg: Config) -> list[Task]:
    """``data.eval_limit`` tasks of ``data.eval`` (seed + 1) whose prompts are not among the
    training tasks (``data.train``, ``data.train_limit``)."""
    from metaagentx.tasks.datasets import load_tasks

    train = load_tasks(cfg.data.train, limit=cfg.data.train_limit, seed=cfg.data.seed)
    seen = {t.prompt for t in train}
    want = cfg.data.eval_limit or 32
    pool = load_tasks(cfg.data.eval, limit=max(200, 4 * want), seed=cfg.data.seed + 1)
    out, prompts = [], set()
    for t in pool:
        if t.prompt not in seen and t.prompt not in prompts:
            out.append(t)
            prompts.add(t.prompt)
    if not out:
        raise ValueError(
            f"data.eval={cfg.data.eval!r}: every task is also a training task; "
            "choose a larger generated set or another eval spec"
        )
    return out[:want]


def _hf_generator(cfg: Config, model: Any, tokenizer: Any) -> Any:
    """A generator serving this live model (shares the nn.Module: no weight copies)."""
    from metaagentx.backends import load_generator

    return load_generator(cfg, model=(model, tokenizer))


def evaluate_policy(
    cfg: Config, gen: Any, tasks: list[Task], label: str, *, temperature: float, progress: bool
) -> dict[str, Any]:
    """Designed-mode eval of one policy on ``tasks`` -> accuracy, validity, wall time."""
    from metaagentx.eval import accuracy, eval_dir, evaluate, validity_rate
    from metaagentx.eval_tables import render_report

    t0 = time.perf_counter()
    folder = eval_dir(cfg.run.out_dir, label)
    rows = asyncio.run(
        evaluate(
            {cfg.data.eval: tasks},
            gen,
            cfg,
            mode="designed",
            items_path=folder / "items.jsonl",
            label=label,
            temperature=temperature,
            progress=progress,
        )
    )
    (folder / "table.md").write_text(render_report({label: rows}))
    return {
        "label": label,
        "accuracy": accuracy(rows),
        "validity": validity_rate(rows),
        "items": len(rows),
        "wall_s": round(time.perf_counter() - t0, 1),
    }


def _stage(name: str, results: dict[str, Any], t0: float) -> None:
    results.setdefault("stages_s", {})[name] = round(time.perf_counter() - t0, 1)
    print(f"[demo] {name} done in {results['stages_s'][name]:.0f}s", flush=True)


def _rl_model(cfg: Config, rl_out: Path) -> tuple[Any, Any]:
    """The policy at the end of RL: the SFT model with the newest RL checkpoint loaded."""
    from metaagentx.backends.models import load_model_and_tokenizer
    from metaagentx.rl.checkpoint import latest_checkpoint, load_checkpoint

    model, tokenizer = load_model_and_tokenizer(
        cfg.model.name,
        dtype=cfg.model.dtype,
        device="cpu" if cfg.model.device == "auto" else cfg.model.device,
    )
    last = latest_checkpoint(rl_out)
    if last is None:
        raise FileNotFoundError(f"RL wrote no checkpoint under {rl_out / 'checkpoints'}")
    load_checkpoint(last, model=model, restore_rng=False)
    model.eval()
    return model, tokenizer


def demonstrations(cfg: Config, gen: Any, out_dir: Path, *, progress: bool) -> dict[str, Any]:
    """Template demonstrations with the policy as executor (correct runs only); stats."""
    from metaagentx.sft_data import format_stats, generate_demonstrations, write_demonstrations
    from metaagentx.tasks.datasets import load_tasks

    train_tasks = load_tasks(cfg.data.train, limit=cfg.sft.tasks, seed=cfg.data.seed)
    designer, executor, stats = asyncio.run(
        generate_demonstrations(train_tasks, gen, cfg, teacher="", executions=1, progress=progress)
    )
    info = write_demonstrations(out_dir, designer, executor, stats)
    print(format_stats(info))
    if not designer:
        raise RuntimeError(
            f"no designer demonstration for {len(train_tasks)} training tasks "
            f"(rejections: {info['rejections']}); raise "
            "generation.designer_max_tokens or sft.tasks"
        )
    return info


def run_demo(
    cfg: Config,
    *,
    progress: bool = True,
    eval_temperature: float = 0.0,
    generator_factory: Callable[[Any, Any], Any] | None = None,
) -> dict[str, Any]:
    """Run every stage (see the module docstring); return and save the summary.

    ``generator_factory(model, tokenizer)`` replaces the configured backend (tests pass a
    scripted one); by default the live model is served by ``generation.backend``."""
    from metaagentx.backends.models import load_model_and_tokenizer
    from metaagentx.rl.trainer import pick_device, set_seed, train
    from metaagentx.sft import MODEL_DIR, train_sft

    out = Path(cfg.run.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    save_config(cfg, out / "config.toml")
    set_seed(cfg.run.seed)
    results: dict[str, Any] = {"model": cfg.model.name}
    t_all = time.perf_counter()
    heldout = held_out_tasks(cfg)
    model, tok = load_model_and_tokenizer(
        cfg.model.name, dtype=cfg.model.dtype, device=pick_device(cfg.model.device)
    )
    make_gen = generator_factory or (lambda m, t: _hf_generator(cfg, m, t))
    gen = make_gen(model, tok)
    kw = {"temperature": eval_temperature, "progress": progress}

    t0 = time.perf_counter()
    results["start"] = evaluate_policy(cfg, gen, heldout, "start", **kw)
    _stage("eval start", results, t0)

    t0 = time.perf_counter()
    results["demonstrations"] = demonstrations(cfg, gen, out / "sft-data", progress=progress)
    _stage("demonstrations", results, t0)

    t0 = time.perf_counter()
    results["sft"] = train_sft(
        cfg, out / "sft-data", out / "sft", model=model, tokenizer=tok, progress=progress
    )
    _stage("sft", results, t0)

    t0 = time.perf_counter()
    results["sft_eval"] = evaluate_policy(cfg, gen, heldout, "sft", **kw)
    _stage("eval sft", results, t0)
    del gen, model

    t0 = time.perf_counter()
    rl_cfg = replace(
        cfg,
        model=replace(cfg.model, name=str(out / "sft" / MODEL_DIR)),
        run=replace(cfg.run, out_dir=str(out / "rl")),
    )
    train(rl_cfg, generator=None if generator_factory is None else generator_factory(None, tok))
    _stage("rl", results, t0)

    t0 = time.perf_counter()
    model, tok = _rl_model(rl_cfg, out / "rl")
    results["rl_eval"] = evaluate_policy(cfg, make_gen(model, tok), heldout, "rl", **kw)
    _stage("eval rl", results, t0)
    results["wall_s"] = round(time.perf_counter() - t_all, 1)
    (out / "demo.json").write_text(json.dumps(results, indent=2) + "\n")
    (out / "demo.md").write_text(summary_markdown(results))
    return results


def summary_markdown(results: dict[str, Any]) -> str:
    """The demo's result table: accuracy and script validity of each policy, and timings."""
    lines = [
        "| Policy | Held-out accuracy % | Script validity % | Eval items |",
        "|---|---|---|---|",
    ]
    for key, name in (("start", "start"), ("sft_eval", "after SFT"), ("rl_eval", "after RL")):
        r = results.get(key)
        if r:
            lines.append(
                f"| {name} | {100 * r['accuracy']:.1f} | {100 * r['validity']:.1f} | {r['items']} |"
            )
    stages = ", ".join(f"{k} {v:.0f}s" for k, v in results.get("stages_s", {}).items())
    lines += ["", f"Stages: {stages}. Total wall time: {results.get('wall_s', 0):.0f}s."]
    return "\n".join(lines) + "\n"
