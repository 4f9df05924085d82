"""Training-step throughput: token-budget packing vs padding every row to the longest one.

One run, one model, one set of rollout rows (seeded, skewed lengths like real MAS calls:
prompt 100-400 tokens, response 10-300 tokens, log-normal): the forward + backward of the
GRPO loss (``loss.token_logprobs`` + ``loss.grpo_loss``) over all rows is timed twice:

* packed   ``packing.make_batches(rows, token_budget)``: rows sorted by length, micro-batches
  filled to the budget, each padded only to its own longest row;
* padded   the baseline: every row padded to the longest row of the set (a fixed maximum,
  as the reference implementation does), ``token_budget // max_len`` rows per micro-batch
  (same memory budget).

Both use the same ``token_logprobs`` (LM head on loss positions only; ``--full-logits`` puts
it on every position). Throughput counts real (non-padding) tokens per second. Achieved FLOP/s of the update is
``6 * params * real_tokens / time`` (2 FLOPs per parameter per token forward, 4 backward;
``params`` counts every parameter once, the tied embedding/LM head included because the head
is a matmul; attention-score FLOPs are left out), against the peak of a large fp32
``torch.matmul`` timed in the same run (``2 n^3`` FLOPs).

Wall-clock figures are printed with CPU-time ones (``time.process_time``): on a shared machine
the CPU-time ratios are the stable ones.

Run: ``.venv/bin/python bench/train_step.py`` (embedded SmolLM2-135M in fp32 on CPU: about
5 minutes on 2 idle cores, ~10 GB peak memory at the default 4096-token budget;
``--token-budget 2048`` roughly halves that) or ``--model tiny`` (a small random Llama,
seconds). On a machine with CUDA it runs on the GPU.
"""

from __future__ import annotations

import argparse
import math
import random
import time
from typing import Any

import torch

from metaagentx.rl.loss import grpo_loss, token_logprobs
from metaagentx.rl.packing import Batch, Row, collate, make_batches


def synth_rows(n: int, vocab: int, seed: int) -> list[Row]:
    """``n`` rows: prompt 100-400 tokens, response 10-300 (log-normal, skewed short)."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        p = rng.randint(100, 400)
        r = min(300, max(10, int(math.exp(rng.gauss(4.3, 0.8)))))
        ids = [rng.randrange(vocab) for _ in range(p + r)]
        adv = rng.choice([-1.0, 1.0])
        old = [0.0] * p + [-rng.uniform(0.1, 3.0) for _ in range(r)]
        rows.append(Row(ids, [0] * p + [1] * r, [0.0] * p + [adv] * r, old, "executor", {"i": i}))
    return rows


def padded_batches(rows: list[Row], token_budget: int, pad_to: int) -> list[Batch]:
    """Baseline: every row padded to ``pad_to``; ``token_budget // pad_to`` rows per batch."""
    per = max(1, token_budget // pad_to)
    return [collate(rows[i : i + per], pad_to=pad_to) for i in range(0, len(rows), per)]


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def time_update(
    model: Any, batches: list[Batch], device: str, full: bool = False
) -> tuple[float, float]:
    """(wall, CPU) seconds of forward + backward of the GRPO loss over ``batches``."""
    model.zero_grad(set_to_none=True)
    total = sum(b.num_tokens for b in batches)
    _sync(device)
    start, cpu = time.perf_counter(), time.process_time()
    for batch in batches:
        b = batch.to(device)
        logprobs, entropy = token_logprobs(model, b, full=full)
        loss, _ = grpo_loss(
            logprobs,
            b.old_logprobs,
            b.advantages,
            b.loss_mask,
            clip_low=0.2,
            clip_high=0.28,
            entropy=entropy,
            num_tokens=total,
        )
        loss.backward()
    _sync(device)
    return time.perf_counter() - start, time.process_time() - cpu


def matmul_peak(n: int, device: str, reps: int = 3) -> tuple[float, float]:
    """Best FLOP per wall second and per CPU second of an ``n x n`` fp32 matmul (``2 n^3``)."""
    a = torch.randn(n, n, device=device)
    b = torch.randn(n, n, device=device)
    torch.matmul(a, b)
    best_wall = best_cpu = float("inf")
    for _ in range(reps):
        _sync(device)
        start, cpu = time.perf_counter(), time.process_time()
        torch.matmul(a, b)
        _sync(device)
        best_wall = min(best_wall, time.perf_counter() - start)
        best_cpu = min(best_cpu, time.process_time() - cpu)
    return 2 * n**3 / best_wall, 2 * n**3 / max(best_cpu, 1e-9)


def load_model(name: str, device: str) -> Any:
    if name == "tiny":
        from transformers import LlamaConfig, LlamaForCausalLM

        torch.manual_seed(0)
        cfg = LlamaConfig(
            vocab_size=4096,
            hidden_size=128,
            intermediate_size=384,
            num_hidden_layers=4,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=1024,
            tie_word_embeddings=True,
        )
        return LlamaForCausalLM(cfg).to(device)
    from metaagentx.backends.models import load_model_and_tokenizer

    return load_model_and_tokenizer(name, dtype="float32", device=device)[0]


def main(argv: list[str] | None = None) -> int:
    """Print packed vs padded tokens/s and the update's FLOP/s vs the matmul peak."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2-135m", help='model name, or "tiny"')
    ap.add_argument("--rows", type=int, default=32, help="rollout rows (calls) in the step")
    ap.add_argument("--token-budget", type=int, default=4096, help="tokens per micro-batch")
    ap.add_argument("--pad-to", type=int, default=0, help="baseline width (0 = longest row)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--matmul-n", type=int, default=2048, help="size of the peak matmul")
    ap.add_argument("--full-logits", action="store_true", help="LM head on every position")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = ap.parse_args(argv)

    model = load_model(args.model, args.device)
    model.train()
    params = sum(p.numel() for p in model.parameters())
    rows = synth_rows(args.rows, model.config.vocab_size, args.seed)
    real = sum(len(r) for r in rows)
    width = args.pad_to or max(len(r) for r in rows)
    packed = make_batches(rows, args.token_budget)
    padded = padded_batches(rows, args.token_budget, width)
    computed = {
        k: sum(b.input_ids.numel() for b in v) for k, v in (("packed", packed), ("padded", padded))
    }
    print(
        f"model {args.model}: {params / 1e6:.1f}M params, device {args.device}, "
        f"threads {torch.get_num_threads()}"
    )
    print(
        f"rows {len(rows)}: {real} real tokens ({sum(sum(r.loss_mask) for r in rows)} in the "
        f"loss), lengths {min(len(r) for r in rows)}-{max(len(r) for r in rows)}"
    )
    time_update(model, [collate(rows[:2])], args.device)  # warm-up (allocator, kernels)
    times = {
        "packed": time_update(model, packed, args.device),
        "padded": time_update(model, padded, args.device),
    }
    peak, peak_cpu = matmul_peak(args.matmul_n, args.device)
    flops = 6 * params * real
    for name, batches in (("packed", packed), ("padded", padded)):
        wall, cpu = times[name]
        print(
            f"{name}: {len(batches)} micro-batches, {computed[name]} computed tokens "
            f"({real / computed[name]:.0%} real), {wall:.1f} s wall ({cpu:.1f} CPU s), "
            f"{real / wall:.0f} tok/s, {flops / wall / 1e9:.2f} GFLOP/s = "
            f"{flops / wall / peak:.1%} of matmul peak"
        )
    print(
        f"matmul peak (fp32 {args.matmul_n}^3): {peak / 1e9:.1f} GFLOP/s wall, "
        f"{peak_cpu / 1e9:.1f} GFLOP per CPU second"
    )
    (pw, pc), (kw, kc) = times["padded"], times["packed"]
    print(
        f"RATIO packed/padded tokens/s: {pw / kw:.2f}x wall, {pc / kc:.2f}x per CPU second "
        f"(baseline: pad every row to {width} tokens)"
    )
    print(
        f"RATIO achieved/peak FLOP/s (packed update): {flops / kw / peak:.3f} wall, "
        f"{flops / kc / peak_cpu:.3f} per CPU second"
    )
    if not args.device.startswith("cuda"):
        print("(per-CPU-second figures stay comparable when other processes share the cores)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
