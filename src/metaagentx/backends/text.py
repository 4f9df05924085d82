"""Text helpers every backend shares: chat rendering, stop strings, a tiny byte tokenizer.

Stdlib only (no torch), so the scripted backend and the sandboxed side stay light.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

from metaagentx.backends.base import GenerationError, SamplingParams


def render_chat(tokenizer: Any, messages: list[dict[str, str]]) -> list[int]:
    """Render chat messages with the tokenizer's own template, generation prompt appended."""
    if not isinstance(messages, list) or not messages:
        raise GenerationError("messages must be a non-empty list of {role, content} dicts")
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping) or "role" not in message or "content" not in message:
            raise GenerationError(f"messages[{i}] must be a dict with 'role' and 'content'")
    if getattr(tokenizer, "chat_template", "") is None:
        raise GenerationError("the model's tokenizer has no chat template; pass prompt ids instead")
    out = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    if isinstance(out, Mapping) or hasattr(out, "keys"):
        out = out["input_ids"]
    return [int(i) for i in out]


def check_request(
    prompt_ids: Sequence[int],
    params: SamplingParams,
    *,
    vocab_size: int,
    max_prompt_tokens: int,
    context: int | None = None,
) -> list[int]:
    """Validate one request; return the prompt as a plain list of ints.

    ``context`` is the model's context length: a prompt must leave room for one new token.
    """
    if not isinstance(params, SamplingParams):
        raise GenerationError(f"params must be SamplingParams, got {type(params).__name__}")
    params.validate()
    if isinstance(params.stop, str) or not all(isinstance(s, str) and s for s in params.stop):
        raise GenerationError(f"stop must be a tuple of non-empty strings, got {params.stop!r}")
    ids = [int(i) for i in prompt_ids]
    if not ids:
        raise GenerationError("prompt_ids is empty")
    if context is not None and len(ids) >= context:
        raise GenerationError(
            f"prompt has {len(ids)} tokens; the model's context is {context} "
            "tokens (room for at least one new token is needed)"
        )
    if len(ids) > max_prompt_tokens:
        raise GenerationError(
            f"prompt has {len(ids)} tokens, more than max_prompt_tokens={max_prompt_tokens}"
        )
    bad = [i for i in ids if not 0 <= i < vocab_size]
    if bad:
        raise GenerationError(
            f"prompt_ids holds ids outside the vocabulary [0, {vocab_size}): {bad[:5]}"
        )
    return ids


def stop_hit(tokenizer: Any, ids: list[int], stops: Sequence[str]) -> bool:
    """True when the decoded tail of ``ids`` contains one of ``stops``.

    Called after every new token, so the first True marks the first token that completes a
    stop string; only a tail window long enough to hold the longest stop string is decoded.
    """
    if not stops:
        return False
    window = 2 * max(len(s) for s in stops) + 8
    tail = tokenizer.decode(ids[-window:], skip_special_tokens=True)
    return any(s in tail for s in stops)


class ByteTokenizer:
    """A trivial byte-level tokenizer (ids 0-255 are bytes; 256 = pad, 257 = eos).

    Lets the scripted backend run without any model. Its chat template is plain text:
    ``<|role|>\\ncontent\\n`` per message, then ``<|assistant|>\\n``.
    """

    pad_token_id = 256
    eos_token_id = 257
    vocab_size = 258
    chat_template = "<|role|>\\ncontent\\n ... <|assistant|>\\n"

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return list(text.encode("utf-8"))

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        data = bytes(int(i) for i in ids if 0 <= int(i) < 256)
        return data.decode("utf-8", errors="replace")

    def apply_chat_template(
        self,
        messages: list[dict[str, str]],
        add_generation_prompt: bool = True,
        tokenize: bool = True,
    ) -> list[int] | str:
        text = "".join(f"<|{m['role']}|>\n{m['content']}\n" for m in messages)
        if add_generation_prompt:
            text += "<|assistant|>\n"
        return self.encode(text) if tokenize else text

    def __len__(self) -> int:
        return self.vocab_size


class ChatMemo:
    """Renders chat messages and remembers them by their prompt ids (thread-safe, bounded).

    A backend whose server or reply function wants the messages, not ids (a chat API, a
    scripted reply function), recovers them in ``generate`` with ``messages_for(ids)``.
    """

    def __init__(self, limit: int = 100_000) -> None:
        self._by_ids: dict[tuple[int, ...], list[dict[str, str]]] = {}
        self._limit = limit
        self._lock = threading.Lock()

    def render(self, tokenizer: Any, messages: list[dict[str, str]]) -> list[int]:
        ids = render_chat(tokenizer, messages)
        with self._lock:
            if len(self._by_ids) > self._limit:
                self._by_ids.clear()
            self._by_ids[tuple(ids)] = [dict(m) for m in messages]
        return ids

    def messages_for(self, ids: Sequence[int]) -> list[dict[str, str]] | None:
        with self._lock:
            return self._by_ids.get(tuple(ids))
