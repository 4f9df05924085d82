"""The RL loop: rollout tree -> rewards -> advantages -> role-masked GRPO -> one step -> log.

    metaagentx train --config configs/cpu-demo.toml [--resume] [--rl.steps=20]

``train(cfg)`` reads top to bottom: seeds, model(s) and tokenizer, the generation backend
(sharing the live module), tasks, optimizer and scheduler, an optional resume, then one loop
iteration per training step. The schedule decides which roles learn at each step; the other
role's tokens are left out of the loss (packing's role mask), never trained with a small
learning rate. Separate-policy mode (``rl.policy = "separate"``) keeps one model per role,
each with its own optimizer; only the model of an active role steps.

A run folder holds ``config.toml``, ``metrics.jsonl``, ``samples/step_XXXXXX.jsonl``,
``checkpoints/step_XXXXXX/`` (``designer/checkpoints/`` too in separate mode) and
``plots/reward.png``. Checkpoints hold the weights, optimizer, scheduler, RNG states, step,
phase and data position, and every sampling request is seeded from (run seed, step, task,
design, execution), so ``--resume`` continues exactly as if the run had never stopped.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from metaagentx.config import Config, config_to_dict, save_config
from metaagentx.rl import metrics as M
from metaagentx.rl.rollout import rollout_step
from metaagentx.types import Episode, Task, to_jsonable


@dataclass
class Policy:
    """One trainable model with its optimizer, scheduler and the generator serving it."""

    name: str  # "shared" | "executor" | "designer"
    roles: set[str]  # roles whose tokens this model trains on
    model: Any
    optimizer: Any
    scheduler: Any
    generator: Any
    ckpt_root: Path = field(default_factory=Path)  # folder holding this policy's checkpoints/
    ref_model: Any = None  # frozen copy of the starting weights (only when rl.kl_coef > 0)


class TaskStream:
    """Tasks in a seeded order, reshuffled each epoch; ``pos`` (tasks consumed) is all the
    state there is, so a checkpointed ``pos`` resumes the same sequence."""

    def __init__(self, tasks: list[Task], seed: int, pos: int = 0) -> None:
        if not tasks:
            raise ValueError("data.train yielded no tasks")
        self.tasks, self.seed, self.pos = tasks, seed, pos

    def _order(self, epoch: int) -> list[int]:
        order = list(range(len(self.tasks)))
        random.Random(self.seed * 1_000_003 + epoch).shuffle(order)
        return order

    def take(self, k: int) -> list[Task]:
        out = []
        for g in range(self.pos, self.pos + k):
            epoch, i = divmod(g, len(self.tasks))
            out.append(self.tasks[self._order(epoch)[i]])
        self.pos += k
        return out


def set_seed(seed: int) -> None:
    import numpy as np

    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def pick_device(name: str) -> str:
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return name


def compute_advantages(
    groups: list[list[Episode]], executor_group: str
) -> tuple[dict[int, float], dict[tuple[int, int], float]]:
    """Designer advantages keyed by flat episode index, executor ones by (episode, run)."""
    from metaagentx.rl.advantages import designer_advantages, executor_advantages

    dadv: dict[int, float] = {}
    eadv: dict[tuple[int, int], float] = {}
    base = 0
    for episodes in groups:
        rewards = [[ex.reward for ex in ep.executions] for ep in episodes]
        for m, a in enumerate(designer_advantages(rewards)):
            dadv[base + m] = float(a)
        for m, row in enumerate(executor_advantages(rewards, group=executor_group)):
            for n, a in enumerate(row):
                eadv[(base + m, n)] = float(a)
        base += len(episodes)
    return dadv, eadv


def _autocast(cfg: Config, device: str) -> Any:
    if not cfg.rl.bf16:
        return nullcontext()
    return torch.autocast(device_type=device.split(":")[0], dtype=torch.bfloat16)


def _to(batch: Any, device: str) -> Any:
    if hasattr(batch, "to"):
        return batch.to(device)
    for name, value in vars(batch).items():
        if isinstance(value, torch.Tensor):
            setattr(batch, name, value.to(device))
    return batch


def _loss_units(rows: list[Any], agg: str) -> int:
    """The step-wide normalizer: loss tokens (token_mean) or sequences (seq_mean)."""
    if agg == "seq_mean":
        return sum(1 for r in rows if any(r.loss_mask))
    return sum(sum(r.loss_mask) for r in rows)


def accumulate_gradients(
    model: Any, rows: list[Any], cfg: Config, device: str, *, units: int, ref_model: Any = None
) -> dict[str, float]:
    """Backpropagate the GRPO loss of ``rows`` over token-budget micro-batches, each scaled by
    the step-wide normalizer ``units`` (so the summed gradient is the step's mean); gradients
    are left in ``.grad``. Returns loss-metric sums weighted by trained tokens."""
    from metaagentx.rl.loss import grpo_loss, token_logprobs
    from metaagentx.rl.packing import make_batches

    rl = cfg.rl
    temperature = cfg.generation.temperature if cfg.generation.temperature > 0 else 1.0
    sums: dict[str, float] = {"loss": 0.0, "trained_tokens": 0.0}
    for batch in make_batches(rows, rl.token_budget) if rows else []:
        batch = _to(batch, device)
        with _autocast(cfg, device):
            logprobs, entropy = token_logprobs(model, batch, temperature=temperature)
            ref = None
            if ref_model is not None:
                with torch.no_grad():
                    ref = token_logprobs(ref_model, batch, temperature=temperature)[0]
        loss, mets = grpo_loss(
            logprobs.float(),
            batch.old_logprobs,
            batch.advantages,
            batch.loss_mask,
            clip_low=rl.clip_low,
            clip_high=rl.clip_high,
            agg=rl.loss_agg,
            ref_logprobs=None if ref is None else ref.float(),
            kl_coef=rl.kl_coef,
            entropy=entropy.float(),
            num_tokens=units,
        )
        loss.backward()
        n = float(batch.loss_mask.sum().item())
        sums["trained_tokens"] += n
        sums["loss"] += float(loss.item())
        for key in ("clip_frac", "kl", "entropy", "ratio_mean"):
            sums[key] = sums.get(key, 0.0) + float(mets.get(key, 0.0)) * n
    return sums


def update_policy(
    policy: Policy,
    episodes: list[Episode],
    dadv: dict[int, float],
    eadv: dict[tuple[int, int], float],
    roles: set[str],
    cfg: Config,
    device: str,
) -> dict[str, float]:
    """The role-masked GRPO update of one step: rows of the ``roles`` calls only, gradient
    accumulated over micro-batches, clipped, then ONE optimizer step and a weight sync.
    Returns token-weighted loss metrics."""
    from metaagentx.rl.packing import rows_from_episodes

    model, rl = policy.model, cfg.rl
    model.train()
    rows = rows_from_episodes(episodes, dadv, eadv, train_roles=roles) if roles else []
    units = _loss_units(rows, rl.loss_agg)
    # Rows whose advantages are all zero contribute exactly zero gradient when there is no KL
    # term; skipping them saves their forward/backward (the normalizer above still counts them).
    live = rows if rl.kl_coef > 0 else [r for r in rows if any(a != 0.0 for a in r.advantages)]
    sums = accumulate_gradients(model, live, cfg, device, units=units, ref_model=policy.ref_model)
    weight = sums["trained_tokens"]
    out = {
        k: (v / weight if weight else 0.0)
        for k, v in sums.items()
        if k not in ("loss", "trained_tokens")
    }
    out["loss"], out["trained_tokens"] = sums["loss"], weight
    out["loss_tokens"] = float(sum(sum(r.loss_mask) for r in rows))
    params = [p for p in model.parameters() if p.requires_grad]
    out["grad_norm"] = (
        float(torch.nn.utils.clip_grad_norm_(params, rl.max_grad_norm)) if weight else 0.0
    )
    out["lr"] = float(policy.optimizer.param_groups[0]["lr"])
    policy.optimizer.step()
    policy.scheduler.step()
    policy.optimizer.zero_grad(set_to_none=True)
    if (
        hasattr(policy.generator, "sync_weights")
        and getattr(policy.generator, "model", None) is not model
    ):
        policy.generator.sync_weights(model.state_dict())
    return out


def _load_policies(
    cfg: Config, device: str, generator: Any, designer_generator: Any, out_dir: Path
) -> list[Policy]:
    """Model(s), tokenizer, generator(s) and optimizer(s) for the configured policy mode."""
    from metaagentx.backends.models import load_model_and_tokenizer
    from metaagentx.rl.optim import build_optimizer

    specs = [("shared", {"designer", "executor"}, cfg.model.name, out_dir)]
    if cfg.rl.policy == "separate":
        specs = [
            ("executor", {"executor"}, cfg.model.name, out_dir),
            (
                "designer",
                {"designer"},
                cfg.model.designer_name or cfg.model.name,
                out_dir / "designer",
            ),
        ]
    policies = []
    for name, roles, model_name, root in specs:
        model, tokenizer = load_model_and_tokenizer(
            model_name, dtype=cfg.model.dtype, device=device
        )
        if cfg.model.gradient_checkpointing:  # renamed in newer transformers
            enable = (
                getattr(model, "activation_checkpointing_enable", None)
                or model.gradient_checkpointing_enable
            )
            enable()
        given = (designer_generator or generator) if name == "designer" else generator
        gen = given if given is not None else _make_generator(cfg, model, tokenizer, model_name)
        opt, sched = build_optimizer(
            model, cfg.rl.lr, cfg.rl.weight_decay, cfg.rl.warmup_steps, cfg.rl.steps
        )
        ref = None
        if cfg.rl.kl_coef > 0:  # a frozen copy of this policy's starting weights
            ref = load_model_and_tokenizer(model_name, dtype=cfg.model.dtype, device=device)[0]
            ref.requires_grad_(False)
        policies.append(Policy(name, roles, model, opt, sched, gen, root, ref))
    return policies


def _make_generator(cfg: Config, model: Any, tokenizer: Any, model_name: str) -> Any:
    """hf: a generator on the live module (weights shared); other backends load
    ``model_name`` themselves and get the weights through ``sync_weights`` after each step."""
    if cfg.generation.backend == "hf":
        from metaagentx.backends.hf import HFGenerator

        return HFGenerator(
            model,
            tokenizer,
            max_batch_size=cfg.generation.max_batch_size,
            max_prompt_tokens=cfg.generation.max_prompt_tokens,
        )
    from metaagentx.backends import load_generator

    return load_generator(cfg, model=model_name)


def _save(policies: list[Policy], cfg: Config, step: int, state: dict[str, Any]) -> None:
    from metaagentx.rl.checkpoint import save_checkpoint

    # The designer (separate mode) is saved first: the main checkpoint marks a complete save.
    for p in sorted(policies, key=lambda p: p.name != "designer"):
        save_checkpoint(
            p.ckpt_root / "checkpoints" / f"step_{step:06d}",
            model=p.model,
            optimizer=p.optimizer,
            scheduler=p.scheduler,
            step=step,
            state=state,
            keep=cfg.rl.keep_checkpoints,
        )


def _resume(policies: list[Policy], out_dir: Path) -> tuple[int, dict[str, Any]]:
    """Load the newest complete checkpoint into every policy; returns (step, state)."""
    from metaagentx.rl.checkpoint import latest_checkpoint, load_checkpoint

    main = latest_checkpoint(out_dir)
    if main is None:
        raise FileNotFoundError(f"--resume: no checkpoint under {out_dir / 'checkpoints'}")
    step, state = 0, {}
    for p in sorted(policies, key=lambda p: p.name == "designer"):
        path = p.ckpt_root / "checkpoints" / main.name
        if not path.is_dir():
            raise FileNotFoundError(f"--resume: {p.name} checkpoint missing at {path}")
        step, state = load_checkpoint(
            path, model=p.model, optimizer=p.optimizer, scheduler=p.scheduler
        )
    return step, state


def _write_samples(out_dir: Path, step: int, groups: list[list[Episode]]) -> None:
    path = out_dir / "samples" / f"step_{step:06d}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as f:
        for episodes in groups:
            for ep in episodes:
                f.write(json.dumps(to_jsonable(ep)) + "\n")


def train_step(
    step: int, policies: list[Policy], tasks: TaskStream, schedule: Any, cfg: Config, device: str
) -> tuple[dict[str, Any], list[list[Episode]]]:
    """One training step (0-based ``step``): rollout tree -> rewards -> advantages ->
    role-masked update of each policy with an active role -> the step's metrics row."""
    roles, phase = set(schedule.roles_at(step)), schedule.phase_at(step)
    batch = tasks.take(cfg.rollout.tasks_per_step)
    gen = next(p for p in policies if "executor" in p.roles).generator
    dgen = next(p for p in policies if "designer" in p.roles).generator
    for p in policies:
        p.model.eval()
    t0 = time.perf_counter()
    groups = asyncio.run(rollout_step(batch, gen, cfg=cfg, designer_generator=dgen, step=step))
    t1 = time.perf_counter()
    dadv, eadv = compute_advantages(groups, cfg.rl.executor_group)
    episodes = [ep for eps in groups for ep in eps]
    updates = {
        p.name: update_policy(p, episodes, dadv, eadv, roles & p.roles, cfg, device)
        for p in policies
        if roles & p.roles
    }
    t2 = time.perf_counter()
    row = M.step_row(step + 1, phase, groups, dadv, eadv, updates, (t1 - t0, t2 - t1))
    return row, groups


def train(
    cfg: Config,
    *,
    resume: bool = False,
    generator: Any = None,
    designer_generator: Any = None,
    on_step: Callable[[dict[str, Any]], None] | None = None,
) -> Path:
    """Run RL training as configured; returns the run folder (``cfg.run.out_dir``).

    ``generator`` / ``designer_generator`` replace the configured backend (e.g. a scripted
    one in tests); the trainer still trains its own model(s) on the recorded token ids.
    ``on_step(row)`` runs after each step's metrics row and checkpoint (raising in it stops
    the run there, as a kill would). Command: ``metaagentx train --config C [--resume]``.
    """
    from rich.console import Console

    from metaagentx.rl.plot import plot_reward
    from metaagentx.rl.schedule import Schedule
    from metaagentx.tasks.datasets import load_tasks

    console = Console(highlight=False)
    out_dir = Path(cfg.run.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    save_config(cfg, out_dir / "config.toml")
    set_seed(cfg.run.seed)
    device = pick_device(cfg.model.device)
    policies = _load_policies(cfg, device, generator, designer_generator, out_dir)
    tasks = TaskStream(
        load_tasks(cfg.data.train, limit=cfg.data.train_limit, seed=cfg.data.seed),
        seed=cfg.data.seed,
    )
    schedule = Schedule(cfg.rl.schedule, cfg.rl.k, cfg.rl.first_phase)
    writer = M.MetricsWriter(
        out_dir,
        tensorboard=cfg.run.log_tensorboard,
        wandb=cfg.run.log_wandb,
        run_config=config_to_dict(cfg),
    )
    start = 0
    if resume:
        start, state = _resume(policies, out_dir)
        tasks.pos = int(state["data_pos"])
        writer.truncate_after(start)  # rows a killed run wrote after its last checkpoint
        console.print(
            f"resumed after step {start} (phase {state.get('phase')}, data position {tasks.pos})"
        )
    for step in range(start, cfg.rl.steps):
        row, groups = train_step(step, policies, tasks, schedule, cfg, device)
        writer.write(row)
        _write_samples(out_dir, step + 1, groups)
        if step % max(1, cfg.run.log_every) == 0 or step + 1 == cfg.rl.steps:
            M.print_progress(console, row, cfg.rl.steps)
        if (step + 1) % max(1, cfg.rl.save_every) == 0 or step + 1 == cfg.rl.steps:
            _save(policies, cfg, step + 1, {"phase": row["phase"], "data_pos": tasks.pos})
            plot_reward(out_dir)
        if on_step is not None:
            on_step(row)
    writer.close()
    if M.read_metrics(out_dir):
        plot_reward(out_dir)
    return out_dir
