"""Supervised fine-tuning on demonstrations (loss on assistant tokens only); cold start for RL.

    metaagentx sft --config configs/cpu-demo.toml --data runs/demo/sft-data
    metaagentx train --config configs/cpu-demo.toml --model.name=runs/demo/sft/model

Writes <out>/metrics.jsonl, <out>/checkpoints/ (resume with --resume) and <out>/model, a
save_pretrained folder the RL trainer and eval load as a local model.
"""

from __future__ import annotations

import argparse


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", default=None, help="TOML config (defaults when omitted)")
    p.add_argument("--data", required=True, help="folder with designer.jsonl / executor.jsonl")
    p.add_argument("--out", default=None, help="output folder (default <run.out_dir>/sft)")
    p.add_argument("--resume", action="store_true", help="continue from the latest checkpoint")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def run(args: argparse.Namespace) -> int:
    """Fine-tune and save the model folder; print the summary."""
    from pathlib import Path

    from metaagentx.config import load_config
    from metaagentx.sft import train_sft

    cfg = load_config(args.config, args.overrides)
    out = Path(args.out or Path(cfg.run.out_dir) / "sft")
    info = train_sft(cfg, args.data, out, resume=args.resume, progress=not args.no_progress)
    print(
        f"sft: {info['steps']} steps on {info['examples']} examples, loss "
        f"{info['first_loss']:.3f} -> {info['last_loss']:.3f}"
    )
    print(f"model: {info['model_dir']}  (train from it with --model.name={info['model_dir']})")
    return 0
