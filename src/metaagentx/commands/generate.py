"""Generate a reply from a model: try a model from the shell.

    metaagentx generate --prompt "What is 2+3?"
    metaagentx generate --model HuggingFaceTB/SmolLM2-360M-Instruct --prompt "Hi" --seed 1
    metaagentx generate --prompt "Count to five." --temperature 0 --max-new-tokens 32 --stats

The prompt is sent as one user message rendered with the model's chat template (--system adds
a system message; --raw sends the text as-is, without a template). The embedded SmolLM2-135M
is used unless --model names a Hugging Face id or a local folder. A spinner shows while the
model loads (the first use of the embedded model also builds its safetensors cache).
"""

from __future__ import annotations

import argparse
import sys


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--prompt", required=True, help="the user message")
    p.add_argument("--model", default=None, help="model name/path (default: model.name)")
    p.add_argument("--system", default=None, help="optional system message")
    p.add_argument("--raw", action="store_true", help="send the prompt without a chat template")
    p.add_argument(
        "--temperature",
        type=float,
        default=None,
        help="sampling temperature, 0 = greedy (default: generation.temperature)",
    )
    p.add_argument("--top-p", type=float, default=None, help="nucleus mass (default: config)")
    p.add_argument("--max-new-tokens", type=int, default=128, help="default 128")
    p.add_argument("--seed", type=int, default=None, help="sampling seed (default: random)")
    p.add_argument("--stop", action="append", default=[], help="stop string (repeatable)")
    p.add_argument("--stats", action="store_true", help="print token counts and speed")
    p.add_argument("--config", default=None, help="TOML config (defaults when omitted)")


def _load(args: argparse.Namespace, cfg):
    """Load the hf generator under a spinner."""
    from rich.console import Console

    from metaagentx.backends import load_generator

    name = args.model or cfg.model.name
    console = Console(stderr=True)
    with console.status(f"loading model {name} ...", spinner="dots"):
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        return load_generator(cfg, model=name)


def run(args: argparse.Namespace) -> int:
    """Load the model, generate one reply, print it (stats to stderr with --stats)."""
    import asyncio
    import time
    from dataclasses import replace

    from metaagentx.backends.base import GenerationError, SamplingParams
    from metaagentx.config import load_config

    cfg = load_config(args.config, getattr(args, "overrides", []))
    if cfg.generation.backend not in ("hf", "vllm", "openai"):
        cfg = replace(cfg, generation=replace(cfg.generation, backend="hf"))
    try:
        params = SamplingParams(
            temperature=cfg.generation.temperature
            if args.temperature is None
            else args.temperature,
            top_p=cfg.generation.top_p if args.top_p is None else args.top_p,
            max_new_tokens=args.max_new_tokens,
            stop=tuple(args.stop),
            seed=args.seed,
        )
        params.validate()
        gen = _load(args, cfg)
        if args.raw:
            ids = gen.tokenizer.encode(args.prompt, add_special_tokens=False)
        else:
            messages = [{"role": "system", "content": args.system}] if args.system else []
            ids = gen.render(messages + [{"role": "user", "content": args.prompt}])
        start = time.perf_counter()
        result = asyncio.run(gen.generate(ids, params))
        elapsed = time.perf_counter() - start
    except GenerationError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    finally:
        if "gen" in locals() and hasattr(gen, "close"):
            gen.close()
    print(result.text)
    if args.stats:
        n = len(result.token_ids)
        print(
            f"[{len(ids)} prompt tokens, {n} new tokens, finish={result.finish_reason}, "
            f"{n / max(elapsed, 1e-9):.1f} tok/s]",
            file=sys.stderr,
        )
    return 0
