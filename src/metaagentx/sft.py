"""Supervised cold start: fine-tune the policy on filtered demonstrations, loss on assistant
tokens only, then save a model folder that the RL trainer starts from.

    metaagentx sft --config configs/cpu-demo.toml --data runs/demo/sft-data --out runs/demo/sft
    metaagentx train --config configs/cpu-demo.toml --model.name=runs/demo/sft/model

Each example (``{"messages": [...]}``, last message the assistant's) becomes one token row:
the prompt is the chat template of every message but the last with the generation prompt
appended (exactly what the generator renders at rollout time), the response is the assistant
text's tokens plus the end-of-turn token (what generation would have produced). Only the
response tokens carry loss. Rows are packed into token-budget batches by the RL packing code,
log-probabilities come from the RL loss module, and model loading, optimizer, checkpoints
(resume with ``--resume``) and ``metrics.jsonl`` are the trainer's own.
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from metaagentx.config import Config, save_config

MODEL_DIR = "model"  # <out>/model: save_pretrained folder loadable by load_model_and_tokenizer


def render_prompt(tokenizer: Any, messages: list[dict[str, str]]) -> list[int]:
    """Chat messages -> prompt ids with the generation prompt appended: the backends' own
    ``render_chat``, so the prompt is token for token what the generator shows the model."""
    from metaagentx.backends.text import render_chat

    return render_chat(tokenizer, messages)


def end_of_turn_id(tokenizer: Any) -> int:
    """The token that ends an assistant turn (the tokenizer's EOS)."""
    if tokenizer.eos_token_id is None:
        raise ValueError("tokenizer has no eos_token_id: cannot mark the end of a response")
    return int(tokenizer.eos_token_id)


def tokenize_example(
    tokenizer: Any, messages: list[dict[str, str]], *, ended: bool = True
) -> tuple[list[int], list[int]]:
    """(input_ids, loss_mask): mask is 1 exactly on the assistant response tokens (its text
    and, when the reply ``ended``, the end-of-turn token), 0 on every prompt token."""
    if not messages or messages[-1].get("role") != "assistant":
        raise ValueError("an SFT example's last message must have role 'assistant'")
    prompt = render_prompt(tokenizer, messages[:-1])
    response = list(tokenizer(messages[-1]["content"], add_special_tokens=False)["input_ids"])
    if ended:
        response.append(end_of_turn_id(tokenizer))
    return prompt + response, [0] * len(prompt) + [1] * len(response)


def load_examples(data_dir: str | Path) -> list[dict[str, Any]]:
    """All examples of ``designer.jsonl`` and ``executor.jsonl`` in ``data_dir``, each with
    ``role`` set from its file. A bad line is an error naming file and line."""
    folder = Path(data_dir)
    out: list[dict[str, Any]] = []
    found = False
    for role in ("designer", "executor"):
        path = folder / f"{role}.jsonl"
        if not path.is_file():
            continue
        found = True
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if not line.strip():
                continue
            try:
                ex = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{i}: not valid JSON ({e})") from e
            if not isinstance(ex.get("messages"), list):
                raise ValueError(f"{path}:{i}: field 'messages' missing or not a list")
            out.append({**ex, "role": role})
    if not found:
        raise FileNotFoundError(
            f"{folder}: neither designer.jsonl nor executor.jsonl found "
            "(write them with: metaagentx sft-data)"
        )
    return out


def build_rows(tokenizer: Any, examples: list[dict[str, Any]], *, max_tokens: int) -> list[Any]:
    """Examples -> packing Rows (advantage 1 on every token so the shared code applies)."""
    from metaagentx.rl.packing import Row

    rows = []
    for ex in examples:
        ids, mask = tokenize_example(
            tokenizer, ex["messages"], ended=ex.get("finish", "stop") != "length"
        )
        if len(ids) > max_tokens:
            continue
        rows.append(
            Row(
                input_ids=ids,
                loss_mask=mask,
                advantages=[1.0] * len(ids),
                old_logprobs=[0.0] * len(ids),
                role=ex["role"],
                meta={"task_id": ex.get("provenance", {}).get("task_id")},
            )
        )
    return rows


def sft_loss(model: Any, batch: Any) -> tuple[Any, int]:
    """Mean negative log-likelihood over the batch's loss-mask tokens; (loss, token count)."""
    from metaagentx.rl.loss import token_logprobs

    logprobs, _ = token_logprobs(model, batch)
    mask = batch.loss_mask.to(logprobs.dtype)
    n = int(mask.sum().item())
    return -(logprobs * mask).sum() / max(1, n), n


def epoch_batches(rows: list[Any], token_budget: int, epoch: int, seed: int) -> list[Any]:
    """The epoch's micro-batches in a seeded order (the same order on resume)."""
    from metaagentx.rl.packing import make_batches

    batches = make_batches(rows, token_budget)
    random.Random(seed * 1000 + epoch).shuffle(batches)
    return batches


def save_model_folder(model: Any, tokenizer: Any, folder: str | Path) -> Path:
    """save_pretrained model + tokenizer so ``--model.name=<folder>`` loads it."""
    folder = Path(folder)
    if getattr(model, "hf_quantizer", None) is not None:
        model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    tmp = folder.with_name(folder.name + ".tmp")
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    if folder.exists():
        import shutil

        shutil.rmtree(folder)
    tmp.rename(folder)
    return folder


def export_run_model(run_dir: str | Path) -> Path:
    """A save_pretrained folder of a training run's newest checkpoint (for eval and serving).

    ``run_dir`` is a run folder (``config.toml`` + ``checkpoints/``) or, in separate-policy
    mode, its ``designer/`` subfolder. The base model named in the run's config is loaded,
    the checkpoint's weights put into it, and the result saved once under
    ``<run_dir>/export/step_XXXXXX`` (reused when present)."""
    from metaagentx.backends.models import load_model_and_tokenizer
    from metaagentx.config import load_config
    from metaagentx.rl.checkpoint import latest_checkpoint, load_checkpoint

    run = Path(run_dir)
    last = latest_checkpoint(run)
    if last is None:
        raise FileNotFoundError(f"{run}: no checkpoints/step_* folder to export")
    own = run / "config.toml"
    rcfg = load_config(own if own.is_file() else run.parent / "config.toml")
    base = rcfg.model.name
    if not own.is_file() and run.name == "designer":
        base = rcfg.model.designer_name or base
    target = run / "export" / last.name
    if (target / "config.json").is_file():
        return target
    model, tokenizer = load_model_and_tokenizer(base, dtype=rcfg.model.dtype, device="cpu")
    load_checkpoint(last, model=model, restore_rng=False)
    return save_model_folder(model, tokenizer, target)


def resolve_model(name: str) -> str:
    """``name`` unchanged, unless it is a training run folder: then its exported model."""
    path = Path(name).expanduser()
    if path.is_dir() and (path / "checkpoints").is_dir() and not (path / "config.json").exists():
        return str(export_run_model(path))
    return name


def sft_config(cfg: Config, out_dir: str | Path) -> Config:
    """The config saved with an SFT run (its out_dir set)."""
    return replace(cfg, run=replace(cfg.run, out_dir=str(out_dir)))


def _progress(total: int, done: int, enabled: bool) -> Any:
    if not enabled:
        return None
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn())
    tid = bar.add_task("sft", total=total, completed=done)
    bar.start()
    return bar, tid


def train_sft(
    cfg: Config,
    data_dir: str | Path,
    out_dir: str | Path,
    *,
    model: Any = None,
    tokenizer: Any = None,
    resume: bool = False,
    progress: bool = True,
) -> dict[str, Any]:
    """Fine-tune on the demonstrations in ``data_dir``; write checkpoints, metrics.jsonl and
    ``<out_dir>/model``. ``model``/``tokenizer`` reuse a loaded policy (else cfg.model.name
    is loaded). Returns a summary (steps, examples, tokens, first/last loss, model folder)."""
    from metaagentx.backends.models import load_model_and_tokenizer
    from metaagentx.rl import checkpoint as ckpt
    from metaagentx.rl.metrics import MetricsWriter
    from metaagentx.rl.optim import build_optimizer
    from metaagentx.rl.trainer import pick_device, set_seed

    out = Path(out_dir)
    set_seed(cfg.run.seed)
    save_config(sft_config(cfg, out), out / "config.toml")
    if model is None:
        model, tokenizer = load_model_and_tokenizer(
            cfg.model.name, dtype=cfg.model.dtype, device=pick_device(cfg.model.device)
        )
    if cfg.model.gradient_checkpointing:
        model.gradient_checkpointing_enable()
    rows = _rows(cfg, tokenizer, data_dir)
    per_epoch = len(epoch_batches(rows, cfg.sft.batch_tokens, 0, cfg.run.seed))
    total = per_epoch * cfg.sft.epochs
    optimizer, scheduler = build_optimizer(
        model, cfg.sft.lr, cfg.rl.weight_decay, cfg.rl.warmup_steps, total
    )
    step, state = 0, {}
    last = ckpt.latest_checkpoint(out) if resume else None
    if last is not None:
        step, state = ckpt.load_checkpoint(
            last, model=model, optimizer=optimizer, scheduler=scheduler
        )
    writer = MetricsWriter(out, tensorboard=cfg.run.log_tensorboard, wandb=cfg.run.log_wandb)
    writer.truncate_after(step)
    bar = _progress(total, step, progress)
    losses: list[float] = list(state.get("losses", []))
    model.train()
    try:
        while step < total:
            epoch, index = divmod(step, per_epoch)
            batch = epoch_batches(rows, cfg.sft.batch_tokens, epoch, cfg.run.seed)[index]
            batch = batch.to(_device_of(model))
            row = sft_update(model, batch, optimizer, scheduler, cfg)
            step += 1
            losses.append(row["loss"])
            writer.write({"step": step, "phase": "sft", "epoch": epoch, **row})
            if bar is not None:
                bar[0].update(bar[1], advance=1, description=f"sft loss {losses[-1]:.3f}")
            if step % max(1, cfg.rl.save_every) == 0 or step == total:
                ckpt.save_checkpoint(
                    out / "checkpoints" / f"step_{step:06d}",
                    model=model,
                    optimizer=optimizer,
                    scheduler=scheduler,
                    step=step,
                    state={"losses": losses, "phase": "sft"},
                    keep=cfg.rl.keep_checkpoints,
                )
    finally:
        if bar is not None:
            bar[0].stop()
        writer.close()
    model.eval()
    folder = save_model_folder(model, tokenizer, out / MODEL_DIR)
    return {
        "steps": step,
        "examples": len(rows),
        "first_loss": losses[0] if losses else None,
        "last_loss": losses[-1] if losses else None,
        "model_dir": str(folder),
    }


def _rows(cfg: Config, tokenizer: Any, data_dir: str | Path) -> list[Any]:
    max_tokens = cfg.generation.max_prompt_tokens + cfg.generation.designer_max_tokens
    rows = build_rows(tokenizer, load_examples(data_dir), max_tokens=max_tokens)
    if not rows:
        raise ValueError(
            f"{data_dir}: no usable SFT examples (all empty or over {max_tokens} tokens)"
        )
    return rows


def sft_update(
    model: Any, batch: Any, optimizer: Any, scheduler: Any, cfg: Config
) -> dict[str, Any]:
    """One optimizer step on one micro-batch; returns its metrics row (without step)."""
    import torch

    t0 = time.perf_counter()
    with torch.autocast(device_type=_device_type(model), dtype=torch.bfloat16, enabled=cfg.rl.bf16):
        loss, ntok = sft_loss(model, batch)
    loss.backward()
    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.rl.max_grad_norm)
    lr = float(optimizer.param_groups[0]["lr"])
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    return {
        "lr": lr,
        "loss": float(loss.item()),
        "grad_norm": float(grad_norm),
        "tokens": ntok,
        "rows": int(batch.input_ids.shape[0]),
        "time_update_s": round(time.perf_counter() - t0, 3),
    }


def _device_of(model: Any) -> Any:
    return next(model.parameters()).device


def _device_type(model: Any) -> str:
    return _device_of(model).type
