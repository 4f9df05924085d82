"""The whole pipeline on the embedded model: demonstrations, SFT, stagewise RL, evaluation.

    metaagentx demo --config configs/cpu-demo.toml        # what `make demo` runs

Evaluates the start, SFT and RL policies on held-out generated tasks and prints their accuracy
and the designer's script validity rate; everything lands under run.out_dir.
"""

from __future__ import annotations

import argparse


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", default="configs/cpu-demo.toml", help="TOML config")
    p.add_argument(
        "--eval-temperature",
        type=float,
        default=0.0,
        help="sampling temperature of the held-out evaluations (default greedy)",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bars")


def run(args: argparse.Namespace) -> int:
    """Run the demo and print the summary table."""
    from metaagentx.config import load_config
    from metaagentx.pipeline import run_demo, summary_markdown

    cfg = load_config(args.config, args.overrides)
    results = run_demo(cfg, progress=not args.no_progress, eval_temperature=args.eval_temperature)
    print()
    print(summary_markdown(results), end="")
    print(f"run folder: {cfg.run.out_dir} (demo.json, demo.md, eval/, sft-data/, sft/, rl/)")
    return 0
