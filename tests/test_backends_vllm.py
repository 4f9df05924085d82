"""vllm backend: a clear error without vLLM; on a CUDA machine, real generation and weight loads."""

from __future__ import annotations

import asyncio
import importlib.util

import pytest

from metaagentx.backends.base import GenerationError, SamplingParams

HAS_VLLM = importlib.util.find_spec("vllm") is not None


@pytest.mark.skipif(HAS_VLLM, reason="vLLM is installed here")
def test_missing_vllm_is_a_clear_error():
    from metaagentx.backends.vllm import VLLMGenerator

    with pytest.raises(GenerationError, match="needs the vllm package.*pip install"):
        VLLMGenerator("smollm2-135m")


def test_load_generator_routes_to_vllm_lazily():
    from metaagentx.backends import load_generator
    from metaagentx.config import load_config

    cfg = load_config(None, ["--generation.backend=vllm"])
    if HAS_VLLM:
        pytest.skip("vLLM is installed here; the gpu test covers it")
    with pytest.raises(GenerationError, match="vllm"):
        load_generator(cfg)


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_VLLM, reason="needs vLLM")
def test_vllm_generates_matches_hf_and_loads_weights():
    import torch

    from metaagentx.backends.models import load_model_and_tokenizer
    from metaagentx.backends.vllm import VLLMGenerator

    gen = VLLMGenerator("smollm2-135m", dtype="float32", gpu_memory_utilization=0.3)
    prompt = gen.render([{"role": "user", "content": "What is 2+3?"}])
    params = SamplingParams(temperature=0, max_new_tokens=8)

    async def many():
        return await asyncio.gather(*(gen.generate(prompt, params) for _ in range(4)))

    outs = asyncio.run(many())
    assert len({tuple(o.token_ids) for o in outs}) == 1 and gen.stats["requests"] == 4
    model, _ = load_model_and_tokenizer("smollm2-135m", device="cuda")
    ids = torch.tensor([prompt + outs[0].token_ids], device="cuda")
    with torch.no_grad():
        logp = torch.log_softmax(model(ids).logits[0].float(), -1)
    ref = [float(logp[len(prompt) - 1 + i, t]) for i, t in enumerate(outs[0].token_ids)]
    assert max(abs(a - b) for a, b in zip(ref, outs[0].logprobs)) < 1e-2
    gen.load_weights({k: torch.zeros_like(v) for k, v in model.state_dict().items()})
    after = asyncio.run(gen.generate(prompt, params))
    assert after.token_ids != outs[0].token_ids  # zeroed weights change what is generated
