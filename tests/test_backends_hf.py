"""hf backend and model loader on the embedded SmolLM2-135M (slow) and a tiny random Llama."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest
import torch

from metaagentx.backends.base import GenerationError, SamplingParams
from metaagentx.backends.hf import HFGenerator
from metaagentx.backends.models import (
    MARKER,
    _cache_matches,
    _sha256,
    cache_dir,
    embedded_gguf_path,
    load_model_and_tokenizer,
)

QUESTIONS = [
    "Hi",
    "What is 2+3?",
    "Write one long sentence about the history of Rome, its emperors and its roads.",
    "Name a color.",
]


@pytest.fixture(scope="module")
def embedded():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a shared 2-core machine: OpenMP barriers stall with more
    model, tokenizer = load_model_and_tokenizer("smollm2-135m")
    gen = HFGenerator(model, tokenizer, max_batch_size=8, max_prompt_tokens=512)
    yield gen
    gen.close()
    torch.set_num_threads(threads)


def gather(gen, prompts, params):
    async def main():
        return await asyncio.gather(*(gen.generate(p, params) for p in prompts))

    return asyncio.run(main())


def teacher_forced(model, prompt, response, temperature):
    """log_softmax(logits / T) of each response token from one plain forward pass."""
    with torch.no_grad():
        logits = model(torch.tensor([prompt + response])).logits[0].float()
    logp = torch.log_softmax(logits / temperature, dim=-1)
    n = len(prompt)
    return torch.tensor([float(logp[n - 1 + i, t]) for i, t in enumerate(response)])


@pytest.mark.slow
def test_embedded_model_loads_from_package_and_is_seeded(embedded):
    model = embedded.model
    assert model.config.num_hidden_layers == 30 and model.config.hidden_size == 576
    marker = json.loads((cache_dir() / "models" / "smollm2-135m" / MARKER).read_text())
    assert marker["source"]["sha256"] == _sha256(embedded_gguf_path())
    assert "model.safetensors" in marker["files"]
    prompt = embedded.render([{"role": "user", "content": "Tell me a story."}])
    runs = [
        asyncio.run(embedded.generate(prompt, SamplingParams(max_new_tokens=6, seed=s)))
        for s in (7, 7, 8)
    ]
    assert runs[0].token_ids == runs[1].token_ids
    assert runs[0].logprobs == runs[1].logprobs
    assert runs[0].token_ids != runs[2].token_ids


@pytest.mark.slow
@pytest.mark.parametrize("temperature", [0.0, 0.7])
def test_logprobs_match_teacher_forced_forward(embedded, temperature):
    prompts = [embedded.render([{"role": "user", "content": q}]) for q in QUESTIONS]
    params = SamplingParams(temperature=temperature, max_new_tokens=6, seed=1)
    for out in gather(embedded, prompts, params):
        ref = teacher_forced(embedded.model, out.prompt_ids, out.token_ids, temperature or 1.0)
        assert (ref - torch.tensor(out.logprobs)).abs().max() < 1e-4
        assert all(lp <= 0 for lp in out.logprobs)


@pytest.mark.slow
def test_batched_greedy_equals_one_at_a_time(embedded):
    prompts = [embedded.render([{"role": "user", "content": q}]) for q in QUESTIONS]
    assert len({len(p) for p in prompts}) == len(prompts)  # all different lengths
    params = SamplingParams(temperature=0, max_new_tokens=10)
    before = embedded.stats["batches"]
    batched = gather(embedded, prompts, params)
    assert embedded.stats["batches"] - before < len(prompts)  # served together
    single = [asyncio.run(embedded.generate(p, params)) for p in prompts]
    assert [b.token_ids for b in batched] == [s.token_ids for s in single]
    assert [b.finish_reason for b in batched] == [s.finish_reason for s in single]
    eos = embedded.tokenizer.eos_token_id
    stopped = [b for b in batched if b.finish_reason == "stop"]
    assert stopped and all(b.token_ids[-1] == eos and eos not in b.token_ids[:-1] for b in stopped)
    assert batched[2].finish_reason == "length" and len(batched[2].token_ids) == 10


@pytest.mark.slow
def test_clear_errors(embedded):
    with pytest.raises(GenerationError, match="no-such-model-xyz"):
        load_model_and_tokenizer("no-such-model-xyz")
    with pytest.raises(GenerationError, match="no such folder"):
        load_model_and_tokenizer("./missing/model/folder")
    with pytest.raises(GenerationError, match="max_prompt_tokens=512"):
        asyncio.run(embedded.generate([1] * 513, SamplingParams()))
    with pytest.raises(GenerationError, match="temperature"):
        asyncio.run(embedded.generate([1, 2], SamplingParams(temperature=-0.5)))
    with pytest.raises(GenerationError, match="top_p"):
        asyncio.run(embedded.generate([1, 2], SamplingParams(top_p=1.5)))
    with pytest.raises(GenerationError, match="vocabulary"):
        asyncio.run(embedded.generate([10**6], SamplingParams()))


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory, embedded):
    """A 2-layer random Llama with the embedded tokenizer, saved like any HF checkpoint."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=len(embedded.tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        eos_token_id=embedded.tokenizer.eos_token_id,
    )
    folder = tmp_path_factory.mktemp("tiny")
    LlamaForCausalLM(cfg).save_pretrained(folder)
    embedded.tokenizer.save_pretrained(folder)
    return folder


@pytest.mark.slow
def test_local_folder_loads_and_late_requests_join(tiny_folder):
    model, tokenizer = load_model_and_tokenizer(str(tiny_folder))
    assert model.config.num_hidden_layers == 2
    gen = HFGenerator(model, tokenizer, max_batch_size=8, max_prompt_tokens=200)
    prompts = [gen.render([{"role": "user", "content": "x" * n}]) for n in (1, 9, 30)]
    long = SamplingParams(temperature=0, max_new_tokens=40)
    first = [gen.submit(p, long) for p in prompts[:2]]
    while gen.stats["steps"] < 3:  # wait until the first two are decoding
        threading.Event().wait(0.01)
    late = gen.submit(prompts[2], SamplingParams(temperature=0, max_new_tokens=5))
    results = [f.result() for f in first] + [late.result()]
    assert gen.stats["batches"] == 2 and gen.stats["max_rows"] == 3  # joined the running batch
    for out in results:
        ref = teacher_forced(model, out.prompt_ids, out.token_ids, 1.0)
        assert (ref - torch.tensor(out.logprobs)).abs().max() < 1e-4
    single = [gen.submit(p, long).result().token_ids for p in prompts[:2]]
    assert single == [r.token_ids for r in results[:2]]
    assert len(results[2].token_ids) == 5 and results[2].finish_reason == "length"
    # over-long for the model's context (256) even though max_prompt_tokens allows more
    big = HFGenerator(model, tokenizer, max_prompt_tokens=4096)
    with pytest.raises(GenerationError, match="300 tokens; the model's context is 256"):
        big.submit([5] * 300, long)
    gen.close()


@pytest.mark.slow
def test_stop_strings_top_p_and_sync_weights(tiny_folder):
    model, tokenizer = load_model_and_tokenizer(str(tiny_folder))
    gen = HFGenerator(model, tokenizer)
    prompt = gen.render([{"role": "user", "content": "hello"}])
    free = gen.submit(prompt, SamplingParams(temperature=0, max_new_tokens=12)).result()
    stop = gen.decode(free.token_ids[3:5])
    assert stop.strip(), "need a visible stop string"
    cut = gen.submit(
        prompt, SamplingParams(temperature=0, max_new_tokens=12, stop=(stop,))
    ).result()
    assert cut.finish_reason == "stop" and stop in cut.text
    assert cut.token_ids == free.token_ids[: len(cut.token_ids)] and len(cut.token_ids) <= 5
    # top_p tiny -> only the most likely token survives: same ids as greedy
    nucleus = gen.submit(prompt, SamplingParams(top_p=1e-6, max_new_tokens=12, seed=3)).result()
    assert nucleus.token_ids == free.token_ids
    enable = (
        getattr(model, "activation_checkpointing_enable", None)
        or model.gradient_checkpointing_enable
    )
    enable()  # as a trainer may leave it: train mode + activation checkpointing
    model.train()
    again = gen.submit(prompt, SamplingParams(temperature=0, max_new_tokens=12)).result()
    assert again.token_ids == free.token_ids and model.training  # served in eval, restored
    state = {k: torch.zeros_like(v) for k, v in model.state_dict().items()}
    gen.sync_weights(state)
    assert all(float(p.detach().abs().sum()) == 0 for p in model.parameters())
    gen.close()


def test_cache_marker_detects_partial_and_stale(tmp_path):
    source = {"version": 1, "gguf": "m.gguf", "size": 3, "sha256": "ab"}
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "model.safetensors").write_bytes(b"0123456789")
    files = {"config.json": 2, "model.safetensors": 10}
    (tmp_path / MARKER).write_text(json.dumps({"source": source, "files": files}))
    assert _cache_matches(tmp_path, source)
    assert not _cache_matches(tmp_path, {**source, "sha256": "cd"})  # GGUF changed
    (tmp_path / "model.safetensors").write_bytes(b"01234")  # truncated copy
    assert not _cache_matches(tmp_path, source)
    (tmp_path / MARKER).unlink()  # build interrupted before the marker
    assert not _cache_matches(tmp_path, source)


@pytest.mark.slow
def test_scripted_with_real_tokenizer_and_load_generator(embedded):
    from metaagentx.backends import load_generator
    from metaagentx.backends.scripted import ScriptedGenerator
    from metaagentx.config import load_config

    msgs = [{"role": "user", "content": "What is 2+2?"}]
    scripted = ScriptedGenerator(["The answer is 4."], tokenizer=embedded.tokenizer)
    assert scripted.render(msgs) == embedded.render(msgs)  # same chat template, same ids
    out = asyncio.run(scripted.generate(scripted.render(msgs), SamplingParams()))
    tok = embedded.tokenizer
    assert out.token_ids == tok.encode("The answer is 4.", add_special_tokens=False) + [
        tok.eos_token_id
    ]
    assert out.text == "The answer is 4."
    live = load_generator(load_config(None, []), model=(embedded.model, tok))
    assert live.model is embedded.model and live.max_batch_size == 16
    echo = load_generator(load_config(None, ["--generation.backend=scripted"]))
    assert (
        asyncio.run(echo.generate(echo.render(msgs), SamplingParams())).text == msgs[0]["content"]
    )


@pytest.mark.slow
def test_generate_command(tiny_folder, capsys):
    from metaagentx.cli import main

    argv = [
        "generate",
        "--model",
        str(tiny_folder),
        "--prompt",
        "hi",
        "--temperature",
        "0",
        "--max-new-tokens",
        "3",
        "--stats",
    ]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    model, tokenizer = load_model_and_tokenizer(str(tiny_folder))
    gen = HFGenerator(model, tokenizer)
    ref = gen.submit(
        gen.render([{"role": "user", "content": "hi"}]),
        SamplingParams(temperature=0, max_new_tokens=3),
    ).result()
    gen.close()
    assert out == ref.text + "\n"
    assert "new tokens" in err
    assert main(argv[:5] + ["--temperature", "-2"]) == 2
    assert "temperature must be >= 0" in capsys.readouterr().err


@pytest.mark.slow
def test_callers_on_several_threads_and_event_loops(tiny_folder):
    model, tokenizer = load_model_and_tokenizer(str(tiny_folder))
    gen = HFGenerator(model, tokenizer, max_batch_size=4)
    prompt = gen.render([{"role": "user", "content": "hello"}])
    params = SamplingParams(temperature=0, max_new_tokens=4)
    expected = gen.submit(prompt, params).result().token_ids
    results = []

    def worker():
        async def main():
            return await asyncio.gather(*(gen.generate(prompt, params) for _ in range(3)))

        results.extend(asyncio.run(main()))

    threads = [threading.Thread(target=worker) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [r.token_ids for r in results] == [expected] * 9
    assert gen.stats["max_rows"] <= 4 and gen.stats["requests"] == 10
    gen.close()
