"""Reward per training step with the phases shaded (the stagewise "staircase" figure).

    from metaagentx.rl.plot import plot_reward
    plot_reward(run_dir)            # reads run_dir/metrics.jsonl, writes run_dir/plots/reward.png

The trainer calls it at every checkpoint and at the end of a run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from metaagentx.rl.metrics import read_metrics

PHASE_COLORS = {"executor": "#4c9be8", "designer": "#f2a93b", "both": "#9b9b9b"}


def phase_spans(rows: list[dict[str, Any]]) -> list[tuple[str, float, float]]:
    """Consecutive runs of one phase as ``(phase, first_step - 0.5, last_step + 0.5)``."""
    spans: list[tuple[str, float, float]] = []
    for row in rows:
        phase, step = row["phase"], row["step"]
        if spans and spans[-1][0] == phase:
            spans[-1] = (phase, spans[-1][1], step + 0.5)
        else:
            spans.append((phase, step - 0.5, step + 0.5))
    return spans


def plot_reward(out_dir: str | Path, path: str | Path | None = None) -> Path:
    """Write the reward-per-step PNG for a run folder and return its path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir = Path(out_dir)
    rows = read_metrics(out_dir)
    if not rows:
        raise FileNotFoundError(f"no metrics rows in {out_dir / 'metrics.jsonl'}")
    path = Path(path) if path is not None else out_dir / "plots" / "reward.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    steps = [r["step"] for r in rows]
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=120)
    seen: set[str] = set()
    for phase, lo, hi in phase_spans(rows):
        label = f"{phase} phase" if phase not in seen else None
        seen.add(phase)
        ax.axvspan(lo, hi, color=PHASE_COLORS.get(phase, "#dddddd"), alpha=0.18, lw=0, label=label)
    ax.plot(
        steps,
        [r["reward_mean"] for r in rows],
        "-o",
        ms=3,
        color="black",
        label="reward (mean over M x N runs)",
    )
    ax.plot(
        steps,
        [r.get("design_reward_mean", 0.0) for r in rows],
        "--",
        color="#c0392b",
        lw=1,
        label="reward of valid designs",
    )
    if len(rows) >= 5:
        w = max(2, len(rows) // 10)
        smooth = [
            sum(r["reward_mean"] for r in rows[max(0, i - w + 1) : i + 1])
            / len(rows[max(0, i - w + 1) : i + 1])
            for i in range(len(rows))
        ]
        ax.plot(
            steps, smooth, "-", color="#2c3e50", lw=2.5, alpha=0.7, label=f"moving mean ({w} steps)"
        )
    ax.set_xlabel("training step")
    ax.set_ylabel("reward")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(f"Reward per step ({out_dir.name})")
    ax.legend(loc="upper left", fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
