"""vLLM backend (GPU): token ids in, token ids + logprobs out, weights loadable from a trainer.

    gen = VLLMGenerator("smollm2-135m", dtype="bfloat16")
    result = await gen.generate(gen.render(messages), SamplingParams(temperature=1.0))
    gen.load_weights(trainer_model.state_dict())         # after an optimizer step

vLLM is imported only when this class is built; without it (or without a CUDA GPU) the
constructor raises GenerationError saying how to install it. A background thread gathers the
requests pending at that moment and hands them to vLLM in one ``generate`` call (vLLM batches
them on the GPU); each request keeps its own sampling params and seed. Logprobs are requested
in vLLM's ``processed_logprobs`` mode, i.e. ``log_softmax(logits / T)`` of the sampled token
(with top_p < 1 vLLM reports them after its top-p filtering, unlike the hf backend).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import queue
import threading
from collections.abc import Sequence
from typing import Any

from metaagentx.backends.base import GenerationError, GenerationResult, SamplingParams
from metaagentx.backends.text import check_request, render_chat

INSTALL_HINT = "install it on a CUDA machine with: pip install 'metaagentx[vllm]'"


def _import_vllm() -> Any:
    try:
        import vllm
    except ImportError as err:
        raise GenerationError(
            f"generation.backend 'vllm' needs the vllm package ({err}); "
            f"{INSTALL_HINT}, or use backend 'hf'"
        ) from None
    return vllm


def _load_into_worker(worker: Any, weights: list[tuple[str, Any]]) -> None:
    """Runs inside each vLLM worker: copy the trainer's tensors into the served model."""
    worker.model_runner.model.load_weights(weights=weights)


class VLLMGenerator:
    """Generator over an in-process ``vllm.LLM``."""

    def __init__(
        self,
        name: str,
        *,
        dtype: str = "bfloat16",
        max_prompt_tokens: int = 2048,
        gpu_memory_utilization: float = 0.5,
        max_model_len: int | None = None,
        seed: int = 0,
        **llm_kwargs: Any,
    ) -> None:
        vllm = _import_vllm()
        import torch

        if not torch.cuda.is_available():
            raise GenerationError(
                f"generation.backend 'vllm' needs a CUDA GPU; {INSTALL_HINT}, "
                "or use backend 'hf' on CPU"
            )
        from metaagentx.backends.models import EMBEDDED_NAME, embedded_model_dir

        source = str(embedded_model_dir()) if name == EMBEDDED_NAME else name
        self._vllm = vllm
        kwargs = dict(
            model=source,
            dtype=dtype,
            seed=seed,
            max_model_len=max_model_len,
            gpu_memory_utilization=gpu_memory_utilization,
            **llm_kwargs,
        )
        try:
            self.llm = vllm.LLM(logprobs_mode="processed_logprobs", **kwargs)
        except TypeError:  # engines before logprobs_mode report post-temperature logprobs
            self.llm = vllm.LLM(**kwargs)
        self.tokenizer = self.llm.get_tokenizer()
        context = int(self.llm.llm_engine.model_config.max_model_len)
        self.context = context
        self.max_prompt_tokens = max_prompt_tokens
        self.vocab_size = max(len(self.tokenizer), getattr(self.tokenizer, "vocab_size", 0))
        self.lock = threading.Lock()  # held while vLLM generates or weights change
        self._queue: queue.Queue[tuple] = queue.Queue()
        self._thread = threading.Thread(target=self._work, name="vllm-generator", daemon=True)
        self._thread.start()
        self.stats = {"requests": 0, "tokens": 0, "batches": 0}

    def render(self, messages: list[dict[str, str]]) -> list[int]:
        """Chat messages -> prompt ids via the model's chat template."""
        return render_chat(self.tokenizer, messages)

    def decode(self, ids: Sequence[int]) -> str:
        """Token ids -> text (special tokens skipped)."""
        return self.tokenizer.decode(list(ids), skip_special_tokens=True)

    async def generate(self, prompt_ids: Sequence[int], params: SamplingParams) -> GenerationResult:
        """Queue one request; requests pending together go to vLLM in one call."""
        ids = check_request(
            prompt_ids,
            params,
            vocab_size=self.vocab_size,
            max_prompt_tokens=self.max_prompt_tokens,
            context=self.context,
        )
        future: concurrent.futures.Future[GenerationResult] = concurrent.futures.Future()
        self._queue.put((ids, params, future))
        return await asyncio.wrap_future(future)

    def load_weights(self, state_dict: dict[str, Any]) -> None:
        """Load a trainer's (HF-named) state dict into the served model; clears prefix cache."""
        weights = [(k, v.detach()) for k, v in state_dict.items()]
        with self.lock:
            if hasattr(self.llm, "collective_rpc"):
                self.llm.collective_rpc(_load_into_worker, args=(weights,))
            else:  # older engines keep the model in the driver process
                runner = self.llm.llm_engine.model_executor.driver_worker.model_runner
                runner.model.load_weights(weights=weights)
            if hasattr(self.llm, "reset_prefix_cache"):
                self.llm.reset_prefix_cache()

    sync_weights = load_weights

    def _sampling(self, params: SamplingParams) -> Any:
        return self._vllm.SamplingParams(
            temperature=params.temperature,
            top_p=params.top_p,
            seed=params.seed,
            max_tokens=min(params.max_new_tokens, self.context),
            stop=list(params.stop),
            include_stop_str_in_output=True,
            logprobs=0,
        )

    def _work(self) -> None:
        while True:
            batch = [self._queue.get()]
            while True:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            try:
                prompts = [{"prompt_token_ids": ids} for ids, _, _ in batch]
                with self.lock:
                    outs = self.llm.generate(
                        prompts, [self._sampling(p) for _, p, _ in batch], use_tqdm=False
                    )
                self.stats["batches"] += 1
                for (ids, _, future), out in zip(batch, outs):
                    future.set_result(self._result(ids, out.outputs[0]))
            except Exception as err:  # fail these requests loudly, keep serving
                for _, _, future in batch:
                    if not future.done():
                        future.set_exception(err)

    def _result(self, ids: list[int], completion: Any) -> GenerationResult:
        tokens = [int(t) for t in completion.token_ids]
        logprobs = [float(step[t].logprob) for t, step in zip(tokens, completion.logprobs or [])]
        if len(logprobs) != len(tokens):
            raise GenerationError(
                f"vLLM returned {len(logprobs)} logprobs for {len(tokens)} tokens"
            )
        self.stats["requests"] += 1
        self.stats["tokens"] += len(tokens)
        finish = "length" if completion.finish_reason == "length" else "stop"
        return GenerationResult(
            prompt_ids=ids,
            token_ids=tokens,
            logprobs=logprobs,
            finish_reason=finish,
            text=self.decode(tokens),
        )
