"""PNG figures for the run report (matplotlib, Agg backend; no display needed).

    metaagentx report RUN_DIR   # writes RUN_DIR/report/figures/*.png through these

Each function takes analysis results, writes one PNG and returns its path, or returns None
when there is nothing to draw (the report then says why instead of showing an empty plot).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from metaagentx.analysis import OUTCOMES, STRUCTURES, phase_spans

PHASE_COLORS = {"executor": "#cfe3f7", "designer": "#fbe0c4", "both": "#dcdcdc"}
STRUCT_COLORS = {
    "single": "#4c72b0",
    "reflection": "#dd8452",
    "ensemble": "#55a868",
    "debate": "#c44e52",
    "solver_tester": "#8172b3",
    "router": "#937860",
    "other": "#999999",
}
OUTCOME_COLORS = {
    "execution": "#4c72b0",
    "design": "#55a868",
    "newly_failed": "#c44e52",
    "both_solved": "#b0c4de",
    "both_failed": "#d9d9d9",
}


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    _plt().close(fig)
    return path


def training_curves(
    metrics: list[dict], path: Path, *, other: list[dict] | None = None, other_name: str = ""
) -> Path | None:
    """Reward, accuracy and design reward per step, the phases shaded (the staircase figure);
    ``other`` (a compared run's metrics) adds its reward curve in grey."""
    if not metrics:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 3.6))
    seen: set[str] = set()
    for phase, first, last in phase_spans(metrics):
        ax.axvspan(
            first - 0.5,
            last + 0.5,
            color=PHASE_COLORS.get(phase, "#eeeeee"),
            alpha=0.8,
            lw=0,
            label=None if phase in seen else f"{phase} phase",
        )
        seen.add(phase)
    steps = [m["step"] for m in metrics]
    for key, style in (("reward_mean", "-o"), ("accuracy", "-s"), ("design_reward_mean", "--")):
        pts = [(s, m[key]) for s, m in zip(steps, metrics) if m.get(key) is not None]
        if pts:
            ax.plot(*zip(*pts), style, ms=3, lw=1.6, label=key)
    pts = [(m["step"], m["reward_mean"]) for m in other or [] if m.get("reward_mean") is not None]
    if pts:
        ax.plot(*zip(*pts), ":", color="#666", lw=1.4, label=f"reward_mean ({other_name})")
    ax.set_xlabel("training step")
    ax.set_ylabel("mean over the step's rollouts")
    ax.set_title("Training curves (background: which role learns)")
    ax.legend(fontsize=8, ncol=3, loc="upper left")
    ax.grid(alpha=0.3)
    return _save(fig, path)


def structure_over_training(metrics: list[dict], path: Path) -> Path | None:
    """Stacked share of each structure among the step's designs."""
    rows = [(m["step"], m.get("structure_counts") or {}) for m in metrics]
    rows = [(s, c) for s, c in rows if sum(c.values())]
    if not rows:
        return None
    plt = _plt()
    names = [s for s in STRUCTURES if any(c.get(s) for _, c in rows)]
    names += sorted({k for _, c in rows for k in c} - set(STRUCTURES))
    steps = [s for s, _ in rows]
    shares = [[c.get(n, 0) / sum(c.values()) for _, c in rows] for n in names]
    fig, ax = plt.subplots(figsize=(8, 3.2))
    ax.stackplot(
        steps, shares, labels=names, colors=[STRUCT_COLORS.get(n, "#bbbbbb") for n in names]
    )
    ax.set_xlabel("training step")
    ax.set_ylabel("share of designs")
    ax.set_ylim(0, 1)
    ax.set_title("Structures the designer chose during training")
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1, 0.5))
    return _save(fig, path)


def structure_mix(dists: dict[str, dict[str, dict[str, int]]], path: Path) -> Path | None:
    """Horizontal stacked bars: one bar per (evaluation label, benchmark), share per structure."""
    bars = [
        (f"{bench} · {label}", counts)
        for label, dist in dists.items()
        for bench, counts in dist.items()
        if sum(counts.values())
    ]
    if not bars:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 0.45 * len(bars) + 1.4))
    left = [0.0] * len(bars)
    for s in STRUCTURES:
        vals = [c.get(s, 0) / sum(c.values()) for _, c in bars]
        if any(vals):
            ax.barh(range(len(bars)), vals, left=left, color=STRUCT_COLORS[s], label=s)
            left = [a + b for a, b in zip(left, vals)]
    ax.set_yticks(range(len(bars)), [b for b, _ in bars], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel("share of evaluated items")
    ax.set_title("Structure mix per benchmark (classified from the scripts)")
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1, 0.5))
    return _save(fig, path)


def attribution_bars(counts: dict[str, int], title: str, path: Path) -> Path | None:
    """One bar per attribution outcome (tasks)."""
    if not sum(counts.values()):
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 2.8))
    ax.bar(
        OUTCOMES, [counts.get(o, 0) for o in OUTCOMES], color=[OUTCOME_COLORS[o] for o in OUTCOMES]
    )
    for i, o in enumerate(OUTCOMES):
        ax.text(i, counts.get(o, 0), str(counts.get(o, 0)), ha="center", va="bottom", fontsize=9)
    ax.set_ylabel("tasks")
    ax.set_title(title, fontsize=10)
    ax.tick_params(axis="x", labelsize=8)
    return _save(fig, path)


def cost_accuracy(costs: dict[str, dict[str, dict[str, Any]]], path: Path) -> Path | None:
    """Tokens per task (x, log) against accuracy (y): one point per (label, structure)."""
    pts = [(label, s, c) for label, per in costs.items() for s, c in per.items()]
    if not pts:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 3.6))
    markers = "osD^vP*X"
    labels = list(costs)
    for k, (label, s, c) in enumerate(pts):
        x, y = max(c["tokens_per_task"], 1), 100 * c["accuracy"]
        ax.scatter(
            x,
            y,
            s=30 + 12 * c["items"] ** 0.5,
            color=STRUCT_COLORS.get(s, "#999"),
            marker=markers[labels.index(label) % len(markers)],
            edgecolor="k",
            lw=0.5,
        )
        ax.annotate(s, (x, y), fontsize=7, xytext=(5, 4 - 9 * (k % 2)), textcoords="offset points")
    for i, label in enumerate(labels):
        ax.scatter(
            [],
            [],
            marker=markers[i % len(markers)],
            color="#bbb",
            edgecolor="k",
            lw=0.5,
            label=label,
        )
    ax.legend(
        fontsize=7, title="evaluation", title_fontsize=7, loc="center left", bbox_to_anchor=(1, 0.5)
    )
    ax.set_xscale("log")
    from matplotlib.ticker import FuncFormatter

    plain = FuncFormatter(lambda v, _: f"{v:g}")
    ax.xaxis.set_major_formatter(plain)
    ax.xaxis.set_minor_formatter(plain)
    ax.tick_params(axis="x", which="both", labelsize=7)
    ax.set_xlabel("tokens per task (prompt + completion, all calls)")
    ax.set_ylabel("accuracy %")
    ax.set_ylim(-5, 105)
    ax.set_title("Cost against accuracy per structure")
    ax.grid(alpha=0.3)
    return _save(fig, path)
