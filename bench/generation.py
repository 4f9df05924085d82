"""Benchmark: batched hf serving of concurrent requests vs the same requests one at a time.

    .venv/bin/python bench/generation.py --threads 1          # 16 requests x 64 greedy tokens
    .venv/bin/python bench/generation.py --requests 8 --max-new-tokens 32 --model smollm2-135m

Both runs use the same model, the same HFGenerator code path, the same prompts and greedy
decoding, so they produce the same tokens (checked). Baseline: each request awaited alone
(batch of one, KV cache). Measured: all requests submitted concurrently and served by the
backend's continuous batching. Prints tokens/s of both and the ratio.

On a shared machine use ``--threads 1``: with more torch threads than free cores, OpenMP
threads wait on each other at every barrier and both timings become noise.
"""

from __future__ import annotations

import argparse
import asyncio
import time

TOPICS = [
    "the sea",
    "a lighthouse",
    "mountains",
    "a robot",
    "rain",
    "a library",
    "trains",
    "the moon",
    "a garden",
    "winter",
    "a violin",
    "deserts",
    "a bakery",
    "bridges",
    "comets",
    "an old map",
    "owls",
    "a market",
    "glaciers",
    "a clock",
]


def prompts_for(gen, n: int) -> list[list[int]]:
    topics = [TOPICS[i % len(TOPICS)] for i in range(n)]
    return [
        gen.render([{"role": "user", "content": f"Write a long, detailed story about {t}."}])
        for t in topics
    ]


async def concurrent(gen, prompts, params):
    return await asyncio.gather(*(gen.generate(p, params) for p in prompts))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--requests", type=int, default=16)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0 = default)")
    args = parser.parse_args()

    import torch

    from metaagentx.backends.base import SamplingParams
    from metaagentx.backends.hf import HFGenerator
    from metaagentx.backends.models import load_model_and_tokenizer

    if args.threads:
        torch.set_num_threads(args.threads)
    model, tokenizer = load_model_and_tokenizer(args.model)
    gen = HFGenerator(model, tokenizer, max_batch_size=args.requests)
    prompts = prompts_for(gen, args.requests)
    params = SamplingParams(temperature=0, max_new_tokens=args.max_new_tokens)
    asyncio.run(gen.generate(prompts[0], SamplingParams(temperature=0, max_new_tokens=4)))

    start = time.perf_counter()
    single = [asyncio.run(gen.generate(p, params)) for p in prompts]
    single_s = time.perf_counter() - start

    start = time.perf_counter()
    batched = asyncio.run(concurrent(gen, prompts, params))
    batched_s = time.perf_counter() - start
    gen.close()

    same = [a.token_ids == b.token_ids for a, b in zip(single, batched)]
    tokens = sum(len(r.token_ids) for r in single)
    single_tps, batched_tps = tokens / single_s, tokens / batched_s
    print(
        f"model {args.model}, {args.requests} requests, greedy, max_new_tokens "
        f"{args.max_new_tokens}, torch threads {torch.get_num_threads()}"
    )
    print(f"tokens generated per run: {tokens} (identical outputs: {sum(same)}/{len(same)})")
    print(f"baseline one-at-a-time : {single_s:7.2f} s  {single_tps:8.1f} tok/s")
    print(f"batched concurrent     : {batched_s:7.2f} s  {batched_tps:8.1f} tok/s")
    print(f"ratio batched / one-at-a-time: {batched_tps / single_tps:.2f}x")


if __name__ == "__main__":
    main()
