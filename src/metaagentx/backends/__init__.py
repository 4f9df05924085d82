"""Generation backends behind one small protocol (see ``base.py``).

    gen = load_generator(cfg)                        # picks cfg.generation.backend
    gen = load_generator(cfg, model=(model, tok))    # hf: serve the trainer's live model

Importing this package is light: each backend (and torch) is imported when it is chosen.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from metaagentx.backends.base import GenerationError, GenerationResult, Generator, SamplingParams

if TYPE_CHECKING:
    from metaagentx.config import Config

__all__ = ["GenerationError", "GenerationResult", "Generator", "SamplingParams", "load_generator"]


def load_generator(cfg: Config, *, model: Any = None) -> Generator:
    """Build the Generator named by ``cfg.generation.backend``.

    ``model`` is ``None`` (load ``cfg.model.name``), a model name overriding it, or — for the
    ``hf`` backend — an already loaded ``(model, tokenizer)`` pair, so that generation runs on
    the very nn.Module the trainer updates. ``scripted`` replies with an echo of the last user
    message (tests pass their own ``ScriptedGenerator`` instead).
    """
    gen_cfg = cfg.generation
    backend = gen_cfg.backend
    live = model if isinstance(model, tuple) else None
    name = model if isinstance(model, str) else cfg.model.name
    if backend == "hf":
        from metaagentx.backends.hf import HFGenerator
        from metaagentx.backends.models import load_model_and_tokenizer

        if live is None:
            live = load_model_and_tokenizer(name, dtype=cfg.model.dtype, device=cfg.model.device)
        return HFGenerator(
            live[0],
            live[1],
            max_batch_size=gen_cfg.max_batch_size,
            max_prompt_tokens=gen_cfg.max_prompt_tokens,
        )
    if backend == "vllm":
        from metaagentx.backends.vllm import VLLMGenerator

        return VLLMGenerator(
            name, dtype=cfg.model.dtype, max_prompt_tokens=gen_cfg.max_prompt_tokens
        )
    if backend == "openai":
        import os

        from metaagentx.backends.openai import OpenAIGenerator

        return OpenAIGenerator(
            gen_cfg.openai_base_url,
            name,
            api_key=os.environ.get(gen_cfg.openai_api_key_env),
            timeout_s=gen_cfg.timeout_s,
            max_concurrency=gen_cfg.max_batch_size,
        )
    if backend == "scripted":
        from metaagentx.backends.scripted import ScriptedGenerator

        return ScriptedGenerator(_echo_last_user)
    raise GenerationError(
        f"generation.backend: {backend!r} is not one of ['hf', 'vllm', 'openai', 'scripted']"
    )


def _echo_last_user(source: Any) -> str:
    if isinstance(source, list):
        users = [m["content"] for m in source if m.get("role") == "user"]
        return users[-1] if users else ""
    return str(source)
