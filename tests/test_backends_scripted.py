"""ScriptedGenerator: replies, token bookkeeping, stop/length, batching of concurrent requests."""

from __future__ import annotations

import asyncio
import threading

import pytest

from metaagentx.backends.base import GenerationError, Generator, SamplingParams
from metaagentx.backends.scripted import ScriptedGenerator, fake_logprob
from metaagentx.backends.text import ByteTokenizer


def run(coro):
    return asyncio.run(coro)


def test_list_replies_cycle_and_byte_tokens():
    gen = ScriptedGenerator(["ab", "c"])
    assert isinstance(gen, Generator)
    ids = gen.render([{"role": "user", "content": "hi"}])
    assert gen.decode(ids) == "<|user|>\nhi\n<|assistant|>\n"
    outs = [run(gen.generate(ids, SamplingParams())) for _ in range(3)]
    assert [o.text for o in outs] == ["ab", "c", "ab"]
    # bytes of "ab" then EOS (257); logprobs are the documented deterministic function
    assert outs[0].token_ids == [97, 98, 257]
    assert outs[0].logprobs == [fake_logprob(97, 0), fake_logprob(98, 1), fake_logprob(257, 2)]
    assert outs[0].finish_reason == "stop"
    assert outs[0].prompt_ids == ids
    assert gen.calls == 3


def test_function_reply_gets_messages_or_text():
    seen = []

    def reply(source):
        seen.append(source)
        return "4" if "2+2" in str(source) else "?"

    gen = ScriptedGenerator(reply)
    msgs = [{"role": "user", "content": "2+2?"}]
    assert run(gen.generate(gen.render(msgs), SamplingParams())).text == "4"
    assert seen[0] == msgs  # rendered by this generator -> the messages themselves
    raw = ByteTokenizer().encode("what is 3+3")
    assert run(gen.generate(raw, SamplingParams())).text == "?"
    assert seen[1] == "what is 3+3"  # otherwise the decoded prompt text


def test_stop_string_and_length():
    gen = ScriptedGenerator(["step one. ANSWER: 5. trailing"])
    out = run(gen.generate([1, 2], SamplingParams(stop=("ANSWER: 5",))))
    assert out.text == "step one. ANSWER: 5"
    assert out.finish_reason == "stop"
    assert 257 not in out.token_ids  # cut by the stop string, no EOS appended
    out = run(gen.generate([1, 2], SamplingParams(max_new_tokens=4)))
    assert out.token_ids == [115, 116, 101, 112]  # "step"
    assert out.finish_reason == "length"
    assert len(out.logprobs) == 4


def test_concurrent_requests_are_batched():
    gen = ScriptedGenerator(lambda p: f"echo {p[-1]['content']}" if isinstance(p, list) else p)

    async def main():
        chats = [[{"role": "user", "content": str(i)}] for i in range(10)]
        return await asyncio.gather(*(gen.generate(gen.render(c), SamplingParams()) for c in chats))

    outs = run(main())
    assert [o.text for o in outs] == [f"echo {i}" for i in range(10)]
    assert gen.calls == 10
    assert gen.batches == 1 and gen.batch_sizes == [10]
    run(gen.generate([65], SamplingParams()))  # a lone request is a batch of its own
    assert gen.batches == 2


def test_works_from_several_threads_and_loops():
    gen = ScriptedGenerator(["x"])
    results = []

    def worker():
        async def main():
            return await asyncio.gather(*(gen.generate([66], SamplingParams()) for _ in range(5)))

        results.extend(asyncio.run(main()))

    threads = [threading.Thread(target=worker) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 15 and all(r.text == "x" for r in results)
    assert gen.calls == 15 and gen.batches <= 15


@pytest.mark.parametrize(
    "params, match",
    [
        (SamplingParams(temperature=-1), "temperature"),
        (SamplingParams(top_p=0), "top_p"),
        (SamplingParams(max_new_tokens=0), "max_new_tokens"),
        (SamplingParams(stop="x"), "stop"),
    ],
)
def test_bad_params_are_errors(params, match):
    gen = ScriptedGenerator(["x"])
    with pytest.raises(GenerationError, match=match):
        run(gen.generate([1], params))


def test_bad_prompts_and_replies_are_errors():
    gen = ScriptedGenerator(["x"], max_prompt_tokens=3)
    with pytest.raises(GenerationError, match="max_prompt_tokens=3"):
        run(gen.generate([1, 2, 3, 4], SamplingParams()))
    with pytest.raises(GenerationError, match="empty"):
        run(gen.generate([], SamplingParams()))
    with pytest.raises(GenerationError, match="vocabulary"):
        run(gen.generate([999], SamplingParams()))
    with pytest.raises(GenerationError, match="non-empty list"):
        ScriptedGenerator([])
    with pytest.raises(GenerationError, match="role"):
        gen.render([{"content": "no role"}])
