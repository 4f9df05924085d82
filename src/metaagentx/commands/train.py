"""Train the policy with RL: M x N rollout trees, split advantages, role-masked GRPO.

    metaagentx train --config configs/cpu-demo.toml
    metaagentx train --config configs/cpu-demo.toml --resume          # continue a killed run
    metaagentx train --config configs/paper-qwen3-8b.toml --rl.k=10 --run.out_dir=runs/k10

Writes into run.out_dir: config.toml (the effective config), metrics.jsonl (one row per step),
samples/step_XXXXXX.jsonl, checkpoints/step_XXXXXX/ and plots/reward.png. Any config field
can be overridden with --section.key=value.
"""

from __future__ import annotations

import argparse


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", default=None, help="TOML config (defaults when omitted)")
    p.add_argument(
        "--resume", action="store_true", help="continue from the newest checkpoint in run.out_dir"
    )


def _changed_keys(old: dict, new: dict) -> list[str]:
    return [
        f"{s}.{k}" for s in new for k in new[s] if old.get(s, {}).get(k, new[s][k]) != new[s][k]
    ]


def run(args: argparse.Namespace) -> int:
    """Load the config (plus overrides), train, print where the run folder is."""
    from pathlib import Path

    from metaagentx.config import config_to_dict, load_config
    from metaagentx.rl.trainer import train

    cfg = load_config(args.config, list(getattr(args, "overrides", [])))
    saved = Path(cfg.run.out_dir) / "config.toml"
    if args.resume and saved.is_file():
        changed = _changed_keys(config_to_dict(load_config(saved)), config_to_dict(cfg))
        if changed:
            print(f"note: resuming with changed settings: {', '.join(changed)}")
    out_dir = train(cfg, resume=args.resume)
    print(f"run folder: {out_dir}  (metrics.jsonl, checkpoints/, plots/reward.png)")
    return 0
