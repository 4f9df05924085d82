"""Save and resume training exactly: weights, optimizer, LR schedule, RNG streams, step, state.

A checkpoint is a folder ``<out_dir>/checkpoints/step_XXXXXX/`` holding

* ``model.safetensors``  the model's weights (tied weights handled by safetensors);
* ``optimizer.pt``, ``scheduler.pt``  their ``state_dict()`` (tensors and plain values only);
* ``rng.pt`` (torch CPU and CUDA generator states) and ``rng.json`` (python, numpy);
* ``meta.json``  ``{"step": ..., "state": {...}}`` where ``state`` is any JSON-able dict the
  trainer needs (phase, data position, ...); it is written last and marks a complete save.

Saving is atomic: everything is written to a hidden temporary folder beside the target, then
renamed into place, so a run killed mid-save leaves the previous checkpoint intact. After a
save only the newest ``keep`` checkpoints in that folder remain.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_model, save_model

STEP_DIR = re.compile(r"^step_(\d+)$")


def _rng_state() -> tuple[dict[str, Any], dict[str, Any]]:
    version, internal, gauss = random.getstate()
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    plain = {
        "python": [version, list(internal), gauss],
        "numpy": [kind, keys.tolist(), int(pos), int(has_gauss), float(cached)],
    }
    tensors: dict[str, Any] = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        tensors["cuda"] = torch.cuda.get_rng_state_all()
    return plain, tensors


def _set_rng_state(plain: dict[str, Any], tensors: dict[str, Any]) -> None:
    version, internal, gauss = plain["python"]
    random.setstate((version, tuple(internal), gauss))
    kind, keys, pos, has_gauss, cached = plain["numpy"]
    np.random.set_state((kind, np.array(keys, dtype=np.uint32), pos, has_gauss, cached))
    torch.set_rng_state(tensors["torch"])
    if "cuda" in tensors and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(tensors["cuda"])


def _step_dirs(folder: Path) -> list[tuple[int, Path]]:
    """Complete checkpoints (with meta.json) in ``folder``, oldest first."""
    if not folder.is_dir():
        return []
    found = []
    for child in folder.iterdir():
        m = STEP_DIR.match(child.name)
        if m and child.is_dir() and (child / "meta.json").is_file():
            found.append((int(m.group(1)), child))
    return sorted(found)


def save_checkpoint(
    dir: str | Path,
    *,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer | None,
    scheduler: Any,
    step: int,
    state: dict[str, Any],
    keep: int = 2,
) -> Path:
    """Write a checkpoint to ``dir`` (e.g. ``<out_dir>/checkpoints/step_000010``) atomically.

    Afterwards only the newest ``keep`` ``step_*`` checkpoints beside it remain (``keep`` <= 0
    keeps all). Returns the checkpoint's path.
    """
    target = Path(dir)
    try:
        meta = json.dumps({"step": int(step), "state": state}, indent=1)
    except TypeError as e:
        raise TypeError(f"checkpoint state must be JSON-serializable: {e}") from e
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f".tmp-{target.name}-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    save_model(model, str(tmp / "model.safetensors"))
    if optimizer is not None:
        torch.save(optimizer.state_dict(), tmp / "optimizer.pt")
    if scheduler is not None:
        torch.save(scheduler.state_dict(), tmp / "scheduler.pt")
    plain, tensors = _rng_state()
    (tmp / "rng.json").write_text(json.dumps(plain))
    torch.save(tensors, tmp / "rng.pt")
    with open(tmp / "meta.json", "w") as f:
        f.write(meta)
        f.flush()
        os.fsync(f.fileno())
    old = target.parent / f".old-{target.name}-{os.getpid()}"
    if target.exists():
        target.rename(old)
    tmp.rename(target)
    if old.exists():
        shutil.rmtree(old)
    if keep > 0:
        for _, path in _step_dirs(target.parent)[:-keep]:
            shutil.rmtree(path, ignore_errors=True)
    return target


def load_checkpoint(
    dir: str | Path,
    *,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer | None = None,
    scheduler: Any = None,
    restore_rng: bool = True,
) -> tuple[int, dict[str, Any]]:
    """Load a checkpoint folder into ``model`` / ``optimizer`` / ``scheduler`` and the RNGs.

    Returns ``(step, state)`` as saved. Weights land on the model's current device.
    """
    path = Path(dir)
    if not (path / "meta.json").is_file():
        raise FileNotFoundError(f"checkpoint: {path} has no meta.json (not a complete checkpoint)")
    device = next(iter(model.parameters())).device
    missing, unexpected = load_model(model, str(path / "model.safetensors"), device=str(device))
    if missing or unexpected:  # pragma: no cover - strict=True raises first
        raise KeyError(f"checkpoint {path}: missing {missing}, unexpected {unexpected}")
    if optimizer is not None:
        if not (path / "optimizer.pt").is_file():
            raise FileNotFoundError(f"checkpoint: {path} has no optimizer.pt")
        optimizer.load_state_dict(torch.load(path / "optimizer.pt", weights_only=True))
    if scheduler is not None:
        if not (path / "scheduler.pt").is_file():
            raise FileNotFoundError(f"checkpoint: {path} has no scheduler.pt")
        scheduler.load_state_dict(torch.load(path / "scheduler.pt", weights_only=True))
    if restore_rng:
        plain = json.loads((path / "rng.json").read_text())
        _set_rng_state(plain, torch.load(path / "rng.pt", weights_only=True))
    meta = json.loads((path / "meta.json").read_text())
    return int(meta["step"]), dict(meta["state"])


def latest_checkpoint(out_dir: str | Path) -> Path | None:
    """The newest complete ``<out_dir>/checkpoints/step_*`` folder, or None if there is none."""
    found = _step_dirs(Path(out_dir) / "checkpoints")
    return found[-1][1] if found else None
