"""Per-step training metrics: aggregate episodes into one row, write ``metrics.jsonl``.

One JSON object per training step, fields as in the run folder layout (see ``step_metrics``).
Optional mirrors to TensorBoard (``run.log_tensorboard``) and Weights & Biases
(``run.log_wandb``); both are imported only when asked for and fail with a clear message when
their package is missing (``pip install 'metaagentx[tracking]'``).
"""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from metaagentx.types import Episode, Outcome


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else 0.0


def _std(xs: list[float]) -> float:
    if not xs:
        return 0.0
    m = _mean(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / len(xs))


def failure_counts(groups: list[list[Episode]]) -> dict[str, int]:
    """Count every execution that did not submit, by outcome (rejections by their reason)."""
    counts: Counter[str] = Counter()
    for episodes in groups:
        for ep in episodes:
            for ex in ep.executions:
                if ex.outcome == Outcome.SUBMITTED:
                    continue
                if ex.outcome == Outcome.REJECTED:
                    counts[f"rejected:{ep.design.rejected or ex.reason or 'unknown'}"] += 1
                else:
                    counts[Outcome(ex.outcome).value] += 1
    return dict(sorted(counts.items()))


def episode_metrics(groups: list[list[Episode]]) -> dict[str, Any]:
    """Reward, accuracy and structure statistics of one step's rollout tree.

    ``reward_mean`` averages every execution's reward; ``accuracy`` is the fraction of
    executions with reward 1; ``design_reward_mean`` averages the mean reward of the designs
    that passed the static check (how good the valid designs are, apart from rejections);
    ``design_valid_frac`` is the fraction of designs that passed it.
    """
    rewards = [ex.reward for eps in groups for ep in eps for ex in ep.executions]
    designs = [ep for eps in groups for ep in eps]
    valid = [ep for ep in designs if ep.design.rejected is None]
    by_structure: dict[str, list[float]] = defaultdict(list)
    for ep in designs:
        by_structure[ep.design.structure].append(ep.mean_reward())
    calls = [c for ep in designs for c in _calls(ep)]
    return {
        "reward_mean": _mean(rewards),
        "accuracy": _mean([1.0 if r >= 1.0 else 0.0 for r in rewards]),
        "design_reward_mean": _mean([ep.mean_reward() for ep in valid]),
        "design_valid_frac": len(valid) / len(designs) if designs else 0.0,
        "reward_by_structure": {k: _mean(v) for k, v in sorted(by_structure.items())},
        "structure_counts": {k: len(v) for k, v in sorted(by_structure.items())},
        "calls": len(calls),
        "tokens": sum(len(c.response_ids) for c in calls),
        "prompt_tokens": sum(len(c.prompt_ids) for c in calls),
        "failures": failure_counts(groups),
        "executions": len(rewards),
    }


def _calls(ep: Episode) -> list:
    out = [ep.design.call] if ep.design.call is not None else []
    return out + [c for ex in ep.executions for c in ex.calls]


def advantage_metrics(designer: list[float], executor: list[float]) -> dict[str, float]:
    """Mean and population std of the step's designer and executor advantages."""
    return {
        "adv_designer_mean": _mean(designer),
        "adv_designer_std": _std(designer),
        "adv_executor_mean": _mean(executor),
        "adv_executor_std": _std(executor),
    }


def step_row(
    step: int,
    phase: str,
    groups: list[list[Episode]],
    dadv: dict[int, float],
    eadv: dict[tuple[int, int], float],
    updates: dict[str, dict[str, float]],
    times: tuple[float, float],
) -> dict[str, Any]:
    """One ``metrics.jsonl`` row (fields as in the run folder layout, plus a few extras).

    ``updates`` maps a policy name ("shared" | "executor" | "designer") to the loss metrics
    of its update; ``times`` is (rollout seconds, update seconds)."""
    ep_stats = episode_metrics(groups)
    row: dict[str, Any] = {"step": step, "phase": phase}
    main = next(iter(updates.values()), {})  # the first stepping policy (executor before designer)
    row["lr"] = main.get("lr", 0.0)
    row.update(
        {
            k: ep_stats[k]
            for k in (
                "reward_mean",
                "accuracy",
                "design_reward_mean",
                "design_valid_frac",
                "reward_by_structure",
                "structure_counts",
            )
        }
    )
    row.update(advantage_metrics(list(dadv.values()), list(eadv.values())))
    trained = sum(u.get("trained_tokens", 0.0) for u in updates.values())

    def wmean(key: str) -> float:
        if not trained:
            return 0.0
        return (
            sum(u.get(key, 0.0) * u.get("trained_tokens", 0.0) for u in updates.values()) / trained
        )

    row["loss"] = sum(u.get("loss", 0.0) for u in updates.values())
    row.update({k: wmean(k) for k in ("clip_frac", "kl", "entropy")})
    row["grad_norm"] = {name: u.get("grad_norm", 0.0) for name, u in updates.items()}
    row["tokens"] = ep_stats["tokens"]
    row["prompt_tokens"] = ep_stats["prompt_tokens"]
    row["trained_tokens"] = int(trained)  # 0: no token had a nonzero advantage (no update)
    row["loss_tokens"] = int(sum(u.get("loss_tokens", 0.0) for u in updates.values()))
    row["calls"] = ep_stats["calls"]
    row["executions"] = ep_stats["executions"]
    row["failures"] = ep_stats["failures"]
    row["time_rollout_s"] = round(times[0], 3)
    row["time_update_s"] = round(times[1], 3)
    row["tokens_per_s"] = round(ep_stats["tokens"] / times[0], 2) if times[0] > 0 else 0.0
    return row


def print_progress(console: Any, row: dict[str, Any], total: int) -> None:
    """The rich one-line summary of a step."""
    fails = sum(row["failures"].values())
    top = ", ".join(
        f"{k}={v}" for k, v in sorted(row["failures"].items(), key=lambda kv: -kv[1])[:3]
    )
    console.print(
        f"[bold]step {row['step']:>4}/{total}[/] [cyan]{row['phase']:<8}[/] "
        f"reward {row['reward_mean']:.3f} acc {row['accuracy']:.3f} "
        f"loss {row['loss']:+.4f} ent {row['entropy']:.2f} clip {row['clip_frac']:.3f} "
        f"| {row['calls']} calls {row['tokens']} tok {row['tokens_per_s']:.1f} tok/s "
        f"| rollout {row['time_rollout_s']:.1f}s update {row['time_update_s']:.1f}s "
        f"| failures {fails}{f' ({top})' if top else ''}",
        highlight=False,
        soft_wrap=True,
    )


class MetricsWriter:
    """Appends one JSON row per step to ``<out_dir>/metrics.jsonl`` (+ optional trackers)."""

    def __init__(
        self,
        out_dir: Path,
        *,
        tensorboard: bool = False,
        wandb: bool = False,
        run_config: dict[str, Any] | None = None,
    ) -> None:
        self.path = Path(out_dir) / "metrics.jsonl"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._tb = _tensorboard_writer(Path(out_dir)) if tensorboard else None
        self._wandb = _wandb_run(Path(out_dir), run_config or {}) if wandb else None

    def truncate_after(self, step: int) -> None:
        """Drop rows with ``step`` greater than the given one (rows a killed run wrote after
        its last checkpoint), so a resumed run's file reads as if never interrupted."""
        if not self.path.exists():
            return
        keep = [
            line
            for line in self.path.read_text().splitlines()
            if line.strip() and json.loads(line)["step"] <= step
        ]
        self.path.write_text("".join(line + "\n" for line in keep))

    def write(self, row: dict[str, Any]) -> None:
        with self.path.open("a") as f:
            f.write(json.dumps(row, sort_keys=False) + "\n")
        scalars = _flatten(row)
        if self._tb is not None:
            for key, value in scalars.items():
                self._tb.add_scalar(key, value, row["step"])
            self._tb.flush()
        if self._wandb is not None:
            self._wandb.log(scalars, step=row["step"])

    def close(self) -> None:
        if self._tb is not None:
            self._tb.close()
        if self._wandb is not None:
            self._wandb.finish()


def read_metrics(out_dir: Path) -> list[dict[str, Any]]:
    """All rows of ``<out_dir>/metrics.jsonl`` (empty list when there is none)."""
    path = Path(out_dir) / "metrics.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _flatten(row: dict[str, Any], prefix: str = "") -> dict[str, float]:
    out: dict[str, float] = {}
    for key, value in row.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_flatten(value, f"{name}/"))
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            out[name] = float(value)
    return out


def _tensorboard_writer(out_dir: Path) -> Any:
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError as e:  # tensorboard not installed
        raise RuntimeError(
            "run.log_tensorboard = true needs the tensorboard package: "
            "pip install 'metaagentx[tracking]'"
        ) from e
    return SummaryWriter(log_dir=str(out_dir / "tensorboard"))


def _wandb_run(out_dir: Path, run_config: dict[str, Any]) -> Any:
    try:
        import wandb
    except ImportError as e:
        raise RuntimeError(
            "run.log_wandb = true needs the wandb package: pip install 'metaagentx[tracking]'"
        ) from e
    return wandb.init(
        project="metaagentx", name=out_dir.name, dir=str(out_dir), config=run_config, resume="allow"
    )
