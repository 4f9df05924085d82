"""transformers backend: concurrent requests decoded together with a KV cache.

    model, tokenizer = load_model_and_tokenizer("smollm2-135m")
    gen = HFGenerator(model, tokenizer, max_batch_size=16)
    results = await asyncio.gather(*(gen.generate(gen.render(m), params) for m in chats))

One background thread owns the model. Callers (any thread, any event loop) queue requests and
await a future. The thread runs continuous batching: pending requests are prefilled together
and merged into the running batch at the next decode step (up to ``max_batch_size`` rows);
a finished row leaves at once while the others go on. Each request has its own sampling
params and its own ``torch.Generator`` (seeded when ``params.seed`` is set), so a seeded
request draws the same numbers whatever else is in the batch.

The trainer updates the same nn.Module: it holds ``gen.lock`` (or simply does not generate)
while it runs forward/backward/step; each decode step takes the lock and runs in eval mode.

Logprobs are ``log_softmax(logits / T)`` of the chosen token in float32 (T = 1 for greedy),
without top-p renormalisation: the same quantity the trainer computes.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import os
import queue
import threading
from collections.abc import Sequence
from typing import Any

import torch

from metaagentx.backends.base import GenerationError, GenerationResult, SamplingParams
from metaagentx.backends.batch import DecodeBatch, Row, left_padded
from metaagentx.backends.text import check_request, render_chat, stop_hit


class HFGenerator:
    """Generator over a live transformers model, shared with the trainer (same nn.Module)."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        max_batch_size: int = 16,
        max_prompt_tokens: int = 2048,
        collect_s: float = 0.002,
    ) -> None:
        if max_batch_size < 1:
            raise GenerationError(f"max_batch_size must be >= 1, got {max_batch_size}")
        self.model = model
        self.tokenizer = tokenizer
        self.max_batch_size = max_batch_size
        self.context = int(getattr(model.config, "max_position_embeddings", 0) or 1 << 30)
        self.max_prompt_tokens = max_prompt_tokens
        self.collect_s = collect_s  # how long the idle worker waits for company after a request
        self.vocab_size = int(model.get_input_embeddings().weight.shape[0])
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        self.eos_ids = _eos_ids(model, tokenizer)
        params = inspect.signature(model.forward).parameters
        self._cache_kw = "cache" if "cache" in params else "past_key_values"  # renamed in v5.2x
        self.lock = threading.Lock()  # held while the model runs a step or weights change
        self._queue: queue.Queue[Row | None] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self._stats = {"requests": 0, "tokens": 0, "batches": 0, "steps": 0, "max_rows": 0}
        self._done: list = []  # (future, result) resolved after the step, mode restored

    @property
    def stats(self) -> dict[str, int]:
        """requests and tokens generated, batches prefilled, decode steps, most rows at once."""
        return dict(self._stats)

    def render(self, messages: list[dict[str, str]]) -> list[int]:
        """Chat messages -> prompt ids via the model's chat template (generation prompt on)."""
        return render_chat(self.tokenizer, messages)

    def decode(self, ids: Sequence[int]) -> str:
        """Token ids -> text (special tokens skipped)."""
        return self.tokenizer.decode(list(ids), skip_special_tokens=True)

    def sync_weights(self, state_dict: dict[str, torch.Tensor]) -> None:
        """Load trainer weights into the served model between decode steps."""
        with self.lock, torch.no_grad():
            self.model.load_state_dict(state_dict, strict=True)

    async def generate(self, prompt_ids: Sequence[int], params: SamplingParams) -> GenerationResult:
        """Queue one request and await its result (batched with concurrent requests)."""
        future = self.submit(prompt_ids, params)
        return await asyncio.wrap_future(future)

    def submit(
        self, prompt_ids: Sequence[int], params: SamplingParams
    ) -> concurrent.futures.Future[GenerationResult]:
        """Thread-safe, loop-free entry: queue a request, get a concurrent Future back."""
        ids = check_request(
            prompt_ids,
            params,
            vocab_size=self.vocab_size,
            max_prompt_tokens=self.max_prompt_tokens,
            context=self.context,
        )
        rng = torch.Generator(device="cpu")
        seed = params.seed if params.seed is not None else int.from_bytes(os.urandom(7), "little")
        rng.manual_seed(seed)
        limit = min(params.max_new_tokens, self.context - len(ids))
        future: concurrent.futures.Future[GenerationResult] = concurrent.futures.Future()
        row = Row(prompt=ids, params=params, future=future, generator=rng, limit=limit)
        self._ensure_worker()
        self._queue.put(row)
        return future

    def close(self) -> None:
        """Stop the worker thread (requests already queued are finished first)."""
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join()
            self._thread = None

    # ---- worker ---------------------------------------------------------------------------

    def _ensure_worker(self) -> None:
        with self._start_lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._work, name="hf-generator", daemon=True)
                self._thread.start()

    def _collect(self, batch: DecodeBatch | None) -> tuple[list[Row], bool]:
        """Pending rows that fit in the batch; blocks when nothing is running."""
        free = self.max_batch_size - (len(batch) if batch else 0)
        rows: list[Row] = []
        stop = False
        if batch is None:
            first = self._queue.get()
            if first is None:
                return rows, True
            rows.append(first)
            if self.collect_s > 0:
                threading.Event().wait(self.collect_s)
        while len(rows) < free:
            try:
                row = self._queue.get_nowait()
            except queue.Empty:
                break
            if row is None:
                stop = True
                break
            rows.append(row)
        return rows, stop

    def _work(self) -> None:
        batch: DecodeBatch | None = None
        stopping = False
        while True:
            new, stop = ([], False) if stopping else self._collect(batch)
            stopping = stopping or stop
            if batch is None and not new:
                return
            try:
                with self.lock, torch.inference_mode():
                    training = self.model.training  # the trainer may have left train mode on
                    if training:
                        self.model.eval()
                    try:
                        batch = self._step(batch, new)
                    finally:
                        if training:
                            self.model.train()
                # Resolve only now, with the model's mode restored: a caller that wakes on its
                # result must find the model exactly as it left it.
                done, self._done = self._done, []
                for future, result in done:
                    if not future.done():
                        future.set_result(result)
            except Exception as err:  # fail the affected requests loudly, keep serving
                for row in (batch.rows if batch else []) + new:
                    if not row.future.done():
                        row.future.set_exception(err)
                batch = None

    def _step(self, batch: DecodeBatch | None, new: list[Row]) -> DecodeBatch | None:
        """Prefill new rows (merging them in) or run one decode step; drop finished rows."""
        if new and (batch is None or batch.can_merge()):
            joined = self._prefill(new)
            if batch is None:
                batch = joined
            else:
                batch.merge(joined)
        else:
            for row in new:  # this cache type cannot merge: requeue for the next batch
                self._queue.put(row)
            self._decode(batch)
        self._stats["max_rows"] = max(self._stats["max_rows"], len(batch))
        keep = [i for i, row in enumerate(batch.rows) if not self._finish(row)]
        if not keep:
            return None
        if len(keep) < len(batch):
            batch.keep(keep)
        return batch

    def _prefill(self, rows: list[Row]) -> DecodeBatch:
        from transformers import DynamicCache

        device = _device(self.model)
        ids, mask, positions = left_padded([r.prompt for r in rows], self.pad_id, device)
        try:
            cache = DynamicCache(config=self.model.config)  # per-layer kinds (sliding or not)
        except TypeError:  # older transformers
            cache = DynamicCache()
        out = self.model(
            input_ids=ids,
            attention_mask=mask,
            position_ids=positions,
            use_cache=True,
            logits_to_keep=1,
            **{self._cache_kw: cache},
        )
        self._sample(rows, out.logits[:, -1])
        self._stats["batches"] += 1
        next_pos = torch.tensor([len(r.prompt) for r in rows], device=device)
        return DecodeBatch(rows, cache, mask, next_pos)  # the cache was filled in place

    def _decode(self, batch: DecodeBatch) -> None:
        ones = batch.mask.new_ones((len(batch), 1))
        batch.mask = torch.cat([batch.mask, ones], dim=1)
        out = self.model(
            input_ids=batch.pending_tokens(),
            attention_mask=batch.mask,
            position_ids=batch.positions[:, None],
            use_cache=True,
            **{self._cache_kw: batch.cache},
        )
        batch.positions = batch.positions + 1
        self._sample(batch.rows, out.logits[:, -1])
        self._stats["steps"] += 1

    def _sample(self, rows: list[Row], logits: torch.Tensor) -> None:
        """Pick each row's next token with its own params and RNG; record its logprob."""
        logits = logits.float().cpu()
        temps = torch.tensor([r.params.temperature or 1.0 for r in rows])
        logp = torch.log_softmax(logits / temps[:, None], dim=-1)
        for i, row in enumerate(rows):
            if row.params.temperature == 0:
                token = int(torch.argmax(logits[i]))
            else:
                token = _draw(logp[i], row.params.top_p, row.generator)
            row.tokens.append(token)
            row.logprobs.append(float(logp[i, token]))
        self._stats["tokens"] += len(rows)

    def _finish(self, row: Row) -> bool:
        """Resolve the row's future when it has ended; True when it has."""
        if row.tokens[-1] in self.eos_ids or stop_hit(self.tokenizer, row.tokens, row.params.stop):
            row.finish = "stop"
        elif len(row.tokens) >= row.limit:
            row.finish = "length"
        else:
            return False
        self._stats["requests"] += 1
        result = GenerationResult(
            prompt_ids=row.prompt,
            token_ids=list(row.tokens),
            logprobs=list(row.logprobs),
            finish_reason=row.finish,
            text=self.decode(row.tokens),
        )
        self._done.append((row.future, result))
        return True


def _draw(logp: torch.Tensor, top_p: float, generator: torch.Generator) -> int:
    """Sample one id from ``exp(logp)`` restricted to the top-p nucleus."""
    probs = logp.exp()
    if top_p < 1.0:
        sorted_p, order = torch.sort(probs, descending=True)
        keep = (sorted_p.cumsum(0) - sorted_p) < top_p  # the first token is always kept
        probs = torch.zeros_like(probs).scatter(0, order[keep], sorted_p[keep])
    cdf = probs.cumsum(0)
    u = torch.rand((), generator=generator) * cdf[-1]
    return int(torch.searchsorted(cdf, u, right=True).clamp(max=len(cdf) - 1))


def _eos_ids(model: Any, tokenizer: Any) -> set[int]:
    ids: set[int] = set()
    for value in (
        tokenizer.eos_token_id,
        getattr(getattr(model, "generation_config", None), "eos_token_id", None),
    ):
        if isinstance(value, int):
            ids.add(value)
        elif isinstance(value, (list, tuple)):
            ids.update(int(v) for v in value)
    return ids


def _device(model: Any) -> torch.device:
    return next(model.parameters()).device
