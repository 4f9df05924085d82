"""Evaluate a model on benchmarks (single agent, a fixed MAS template, or designed MAS).

    metaagentx eval --model smollm2-135m --benchmarks generated:arith --mode designed --limit 8
    metaagentx eval --benchmarks aime24,aime25,olympiadbench,livecodebench,apps,codecontests \\
        --mode fixed:reflection --samples 4 --out runs/base --label reflection
    metaagentx eval --table runs/base/eval/* runs/rl/eval/*     # side-by-side table

Writes <out>/eval/<label>/items.jsonl (one line per benchmark, task and sample; a rerun
resumes) and table.md (pass@1 in %, Avg last, plus tokens and calls per task per structure).
"""

from __future__ import annotations

import argparse


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", default=None, help="TOML config (defaults when omitted)")
    p.add_argument(
        "--model",
        default=None,
        help="model name, folder, or training run folder (its newest checkpoint); "
        "overrides model.name",
    )
    p.add_argument(
        "--designer-model",
        default=None,
        help="designed mode: a different model writes the scripts (e.g. a trained "
        "designer with a frozen executor); same forms as --model",
    )
    p.add_argument(
        "--benchmarks",
        default=None,
        help="comma-separated specs, e.g. aime24,apps or generated:arith "
        "(default: data.eval of the config)",
    )
    p.add_argument(
        "--mode",
        default="designed",
        help="single | fixed:<structure> | designed (default designed)",
    )
    p.add_argument("--samples", type=int, default=1, help="samples per task (pass@1 averaged)")
    p.add_argument(
        "--limit",
        type=int,
        default=None,
        help="tasks per benchmark (0 = all; default data.eval_limit)",
    )
    p.add_argument(
        "--temperature",
        type=float,
        default=None,
        help="sampling temperature (default generation.temperature)",
    )
    p.add_argument("--out", default=None, help="run folder (default run.out_dir)")
    p.add_argument("--label", default=None, help="row name in the table (default from mode)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument(
        "--table",
        nargs="+",
        default=None,
        metavar="DIR",
        help="only print a side-by-side table of these eval folders / run folders",
    )


def run(args: argparse.Namespace) -> int:
    """Run an evaluation, or with --table print a table of finished ones."""
    from metaagentx.eval_tables import load_results, render_report

    if args.table:
        print(render_report(load_results(args.table)), end="")
        return 0

    from metaagentx.backends import load_generator
    from metaagentx.config import load_config
    from metaagentx.eval import eval_dir, parse_mode, run_eval
    from metaagentx.sft import resolve_model

    overrides = list(args.overrides)
    if args.model:
        overrides.append(f"--model.name={resolve_model(args.model)}")
    cfg = load_config(args.config, overrides)
    mode = parse_mode(args.mode)
    benchmarks = [b for b in (args.benchmarks or cfg.data.eval).split(",") if b]
    label = args.label or mode.name.replace("fixed:", "").replace(":", "-")
    out = args.out or cfg.run.out_dir
    gen = load_generator(cfg)
    designer = None
    if args.designer_model:
        designer = load_generator(cfg, model=resolve_model(args.designer_model))
    limit = cfg.data.eval_limit if args.limit is None else args.limit
    run_eval(
        cfg,
        gen,
        benchmarks=benchmarks,
        mode=args.mode,
        out_dir=out,
        label=label,
        samples=args.samples,
        limit=limit,
        temperature=args.temperature,
        progress=not args.no_progress,
        designer=designer,
    )
    folder = eval_dir(out, label)
    print((folder / "table.md").read_text(), end="")
    print(f"items: {folder / 'items.jsonl'}")
    return 0
