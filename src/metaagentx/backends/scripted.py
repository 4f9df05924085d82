"""Deterministic replies for tests: a Generator that needs no model (stdlib only).

    gen = ScriptedGenerator(["The answer is 5.", "I agree."])        # list: cycled
    gen = ScriptedGenerator(lambda prompt: "4" if "2+2" in str(prompt) else "?")
    results = await asyncio.gather(*(gen.generate(gen.render(m), params) for m in chats))
    assert gen.batches < gen.calls                                    # requests were batched

Replies: a list is served in order of arrival and **cycled** (reply ``k`` goes to the ``k``-th
request, modulo the list's length), so a short list can feed a long rollout. A function gets
the chat messages when the prompt was rendered by this generator's ``render``, otherwise the
decoded prompt text, and returns the reply text.

Tokens: the reply is encoded with the tokenizer (a real Hugging Face tokenizer when given, so
packing can train a tiny real model on the ids; otherwise the built-in ``ByteTokenizer``).
``max_new_tokens`` truncates it (finish ``length``); a stop string cuts the text just after the
stop string (finish ``stop``); otherwise the EOS id is appended (finish ``stop``). Logprobs are
fake but consistent: a fixed function of (token id, position), always in [-1.0, -0.01], so tests
can assert they are carried through unchanged. They are NOT probabilities of any model.

Batching: requests pending at the same time on one event loop (submitted before the loop next
gets control back) are served together as one batch; ``.calls`` counts requests and
``.batches`` counts batches served.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from typing import Any

from metaagentx.backends.base import GenerationError, GenerationResult, SamplingParams
from metaagentx.backends.text import ByteTokenizer, ChatMemo, check_request

Reply = Callable[[Any], str]


def fake_logprob(token_id: int, position: int) -> float:
    """The scripted backend's deterministic stand-in logprob, in [-1.0, -0.01]."""
    return -0.01 - ((token_id * 31 + position * 7) % 100) / 100.0


class ScriptedGenerator:
    """A Generator whose replies come from a list (cycled) or a function; for tests."""

    def __init__(
        self,
        replies: Sequence[str] | Reply,
        tokenizer: Any = None,
        *,
        max_prompt_tokens: int = 1 << 20,
    ) -> None:
        if not callable(replies):
            replies = list(replies)
            if not replies or not all(isinstance(r, str) for r in replies):
                raise GenerationError("replies must be a non-empty list of strings or a function")
        self.replies = replies
        self.tokenizer = tokenizer if tokenizer is not None else ByteTokenizer()
        self.max_prompt_tokens = max_prompt_tokens
        self.calls = 0  # requests served
        self.batches = 0  # batches served (< calls when concurrent requests were batched)
        self.batch_sizes: list[int] = []  # size of every batch, in order
        self.prompts: list[Any] = []  # what each request's reply was chosen from, in order
        self._chats = ChatMemo()
        self._pending: dict[asyncio.AbstractEventLoop, list[tuple]] = {}
        self._lock = threading.Lock()

    @property
    def stats(self) -> dict[str, int]:
        return {"calls": self.calls, "batches": self.batches}

    def render(self, messages: list[dict[str, str]]) -> list[int]:
        """Chat messages -> prompt ids (the tokenizer's chat template, generation prompt on)."""
        return self._chats.render(self.tokenizer, messages)

    def decode(self, ids: Sequence[int]) -> str:
        """Token ids -> text (special tokens skipped)."""
        return self.tokenizer.decode(list(ids), skip_special_tokens=True)

    def sync_weights(self, state_dict: Any) -> None:
        """No weights to sync; present so the trainer can treat every backend alike."""

    async def generate(self, prompt_ids: Sequence[int], params: SamplingParams) -> GenerationResult:
        """Queue one request; it is served with every other request pending on this loop."""
        vocab = getattr(self.tokenizer, "vocab_size", None) or len(self.tokenizer)
        vocab = max(vocab, len(self.tokenizer))
        ids = check_request(
            prompt_ids, params, vocab_size=vocab, max_prompt_tokens=self.max_prompt_tokens
        )
        loop = asyncio.get_running_loop()
        future: asyncio.Future[GenerationResult] = loop.create_future()
        with self._lock:
            pending = self._pending.setdefault(loop, [])
            pending.append((ids, params, future))
            first = len(pending) == 1
        if first:
            loop.create_task(self._serve(loop))
        return await future

    async def _serve(self, loop: asyncio.AbstractEventLoop) -> None:
        for _ in range(3):  # let every coroutine that is ready submit before serving
            await asyncio.sleep(0)
        with self._lock:
            batch = self._pending.pop(loop, [])
            if not batch:
                return
            self.batches += 1
            self.batch_sizes.append(len(batch))
        for ids, params, future in batch:
            try:
                result = self._one(ids, params)
            except Exception as err:  # a bad reply function fails its own request only
                if not future.done():
                    future.set_exception(err)
                continue
            if not future.done():
                future.set_result(result)

    def _reply_text(self, ids: list[int]) -> str:
        with self._lock:
            index = self.calls
            self.calls += 1
        source = self._chats.messages_for(ids)
        if source is None:
            source = self.decode(ids)
        self.prompts.append(source)
        if callable(self.replies):
            text = self.replies(source)
            if not isinstance(text, str):
                raise GenerationError(f"reply function returned {type(text).__name__}, not str")
            return text
        return self.replies[index % len(self.replies)]

    def _one(self, ids: list[int], params: SamplingParams) -> GenerationResult:
        text = self._reply_text(ids)
        finish = "stop"
        cuts = [text.find(s) + len(s) for s in params.stop if s in text]
        if cuts:
            text = text[: min(cuts)]
        tokens = list(self.tokenizer.encode(text, add_special_tokens=False))
        eos = getattr(self.tokenizer, "eos_token_id", None)
        if not cuts and eos is not None:
            tokens.append(int(eos))
        if len(tokens) > params.max_new_tokens:
            tokens = tokens[: params.max_new_tokens]
            finish = "length"
        logprobs = [fake_logprob(t, i) for i, t in enumerate(tokens)]
        return GenerationResult(
            prompt_ids=ids,
            token_ids=tokens,
            logprobs=logprobs,
            finish_reason=finish,
            text=self.decode(tokens),
        )
