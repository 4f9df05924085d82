"""Generate cold-start demonstrations (designer scripts and agent calls), kept only if correct.

    metaagentx sft-data --config configs/cpu-demo.toml --out runs/demo/sft-data
    metaagentx sft-data --config C --teacher Qwen/Qwen3-32B --generation.backend=openai

Without a teacher, designer examples come from our templates and the policy itself fills the
executor side by rejection sampling. Writes designer.jsonl, executor.jsonl and stats.json.
"""

from __future__ import annotations

import argparse


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", default=None, help="TOML config (defaults when omitted)")
    p.add_argument(
        "--teacher",
        default=None,
        help="teacher model served by generation.backend (default sft.teacher; "
        "empty = templates + policy)",
    )
    p.add_argument(
        "--executions",
        type=int,
        default=1,
        help="executions of each design (each correct one is kept)",
    )
    p.add_argument("--out", default=None, help="output folder (default <run.out_dir>/sft-data)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def run(args: argparse.Namespace) -> int:
    """Generate, filter and write the demonstrations; print sizes, mix and acceptance rate."""
    from pathlib import Path

    from metaagentx.config import load_config
    from metaagentx.sft_data import build_demonstrations, format_stats

    cfg = load_config(args.config, args.overrides)
    out = Path(args.out or Path(cfg.run.out_dir) / "sft-data")
    info = build_demonstrations(
        cfg, out, teacher=args.teacher, executions=args.executions, progress=not args.no_progress
    )
    print(format_stats(info))
    print(f"written: {out}/designer.jsonl, {out}/executor.jsonl, {out}/stats.json")
    return 0
