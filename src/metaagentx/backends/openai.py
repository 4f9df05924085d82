"""Any OpenAI-compatible server (teachers, served models): chat and completions over HTTP.

    gen = OpenAIGenerator("http://127.0.0.1:8000/v1", "Qwen/Qwen3-8B", api_key=None)
    result = await gen.chat([{"role": "user", "content": "2+3?"}], SamplingParams())
    result = await gen.generate(gen.render(messages), params)   # the Generator protocol

Stdlib only (urllib). Requests run on a private thread pool (``max_concurrency`` at once; the
server does the batching). A connection failure, a timeout, or HTTP 429/5xx is retried
``max_retries`` times with exponential backoff (``backoff_s * 2**k``); after that a
``ServerError`` names the URL. Other HTTP errors fail at once with the server's message.
``timeout_s`` bounds each socket operation (connect, each read).

Token ids: with ``token_ids=True`` (a vLLM extension: ``return_tokens_as_token_ids``,
``include_stop_str_in_output``) the ids and logprobs are exactly the server's. Otherwise the
reply text is encoded with ``tokenizer`` (or a byte tokenizer); logprobs are the server's when
their count matches the ids, else NaN (unknown: such calls must not be trained on), and a
standard server leaves the stop string out of the text. ``generate`` sends a prompt rendered
by ``render`` as chat messages; other prompt ids go to the completions endpoint (as ids when a
real tokenizer is given, else as decoded text).
"""

from __future__ import annotations

import asyncio
import json
import math
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from metaagentx.backends.base import GenerationError, GenerationResult, SamplingParams
from metaagentx.backends.text import ByteTokenizer, ChatMemo, check_request

RETRY_STATUS = {408, 409, 429, 500, 502, 503, 504}


class ServerError(GenerationError):
    """The server could not be reached or kept failing after all retries."""


class OpenAIGenerator:
    """Generator over an OpenAI-compatible HTTP API."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        tokenizer: Any = None,
        timeout_s: float = 120.0,
        max_retries: int = 3,
        backoff_s: float = 0.5,
        max_concurrency: int = 16,
        token_ids: bool = False,
        max_prompt_tokens: int = 1 << 20,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.model_name = model
        self.api_key = api_key
        self.real_tokenizer = tokenizer is not None
        self.tokenizer = tokenizer if tokenizer is not None else ByteTokenizer()
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.token_ids = token_ids
        self.max_prompt_tokens = max_prompt_tokens
        self._pool = ThreadPoolExecutor(max_workers=max_concurrency, thread_name_prefix="openai")
        self._chats = ChatMemo()
        self._lock = threading.Lock()
        self.calls = 0  # requests answered

    def render(self, messages: list[dict[str, str]]) -> list[int]:
        """Chat messages -> ids (remembered, so ``generate`` sends them as chat messages)."""
        return self._chats.render(self.tokenizer, messages)

    def decode(self, ids: Sequence[int]) -> str:
        """Token ids -> text (special tokens skipped)."""
        return self.tokenizer.decode(list(ids), skip_special_tokens=True)

    async def generate(self, prompt_ids: Sequence[int], params: SamplingParams) -> GenerationResult:
        """Chat request for a prompt made by ``render``, completions request otherwise."""
        vocab = max(getattr(self.tokenizer, "vocab_size", 0) or 0, len(self.tokenizer))
        ids = check_request(
            prompt_ids, params, vocab_size=vocab, max_prompt_tokens=self.max_prompt_tokens
        )
        messages = self._chats.messages_for(ids)
        if messages is not None:
            result = await self.chat(messages, params)
        else:
            result = await self.complete(ids if self.real_tokenizer else self.decode(ids), params)
        result.prompt_ids = ids
        return result

    async def chat(
        self, messages: list[dict[str, str]], params: SamplingParams
    ) -> GenerationResult:
        """POST /chat/completions with ``messages``."""
        params.validate()
        payload = {"messages": messages, "logprobs": True, **self._sampling(params)}
        body = await self._post_async("/chat/completions", payload)
        choice = self._choice(body, "/chat/completions")
        text = (choice.get("message") or {}).get("content") or ""
        entries = (choice.get("logprobs") or {}).get("content") or []
        tokens = [e.get("token", "") for e in entries]
        logprobs = [e.get("logprob") for e in entries]
        return self._result([], text, tokens, logprobs, choice.get("finish_reason"))

    async def complete(self, prompt: str | list[int], params: SamplingParams) -> GenerationResult:
        """POST /completions with a text prompt or a list of token ids."""
        params.validate()
        payload = {"prompt": prompt, "logprobs": 1, **self._sampling(params)}
        body = await self._post_async("/completions", payload)
        choice = self._choice(body, "/completions")
        lp = choice.get("logprobs") or {}
        ids = prompt if isinstance(prompt, list) else []
        return self._result(
            ids,
            choice.get("text") or "",
            lp.get("tokens") or [],
            lp.get("token_logprobs") or [],
            choice.get("finish_reason"),
        )

    def _sampling(self, params: SamplingParams) -> dict[str, Any]:
        out: dict[str, Any] = {
            "model": self.model_name,
            "max_tokens": params.max_new_tokens,
            "temperature": params.temperature,
            "top_p": params.top_p,
        }
        if params.stop:
            out["stop"] = list(params.stop)
        if params.seed is not None:
            out["seed"] = params.seed
        if self.token_ids:
            out["return_tokens_as_token_ids"] = True
            out["include_stop_str_in_output"] = True
        return out

    def _result(
        self, prompt_ids: list[int], text: str, tokens: list[str], logprobs: list[Any], finish: Any
    ) -> GenerationResult:
        if tokens and all(isinstance(t, str) and t.startswith("token_id:") for t in tokens):
            ids = [int(t.split(":", 1)[1]) for t in tokens]
        else:
            ids = list(self.tokenizer.encode(text, add_special_tokens=False))
        if len(logprobs) == len(ids) and all(isinstance(v, (int, float)) for v in logprobs):
            values = [float(v) for v in logprobs]
        else:
            values = [math.nan] * len(ids)
        with self._lock:
            self.calls += 1
        return GenerationResult(
            prompt_ids=prompt_ids,
            token_ids=ids,
            logprobs=values,
            finish_reason="length" if finish == "length" else "stop",
            text=text,
        )

    def _choice(self, body: dict[str, Any], path: str) -> dict[str, Any]:
        choices = body.get("choices") if isinstance(body, dict) else None
        if not choices or not isinstance(choices[0], dict):
            raise ServerError(f"{self.base_url}{path} answered without choices: {str(body)[:200]}")
        return choices[0]

    async def _post_async(self, path: str, payload: dict[str, Any]) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, self.post, path, payload)

    def post(self, path: str, payload: dict[str, Any]) -> dict[str, Any]:
        """POST JSON to ``base_url + path`` with retries; return the decoded JSON reply."""
        url = f"{self.base_url}{path}"
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        data = json.dumps(payload).encode()
        last = ""
        for attempt in range(self.max_retries + 1):
            if attempt:
                time.sleep(self.backoff_s * 2 ** (attempt - 1))
            request = urllib.request.Request(url, data=data, headers=headers, method="POST")
            try:
                with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                    return json.loads(response.read().decode())
            except urllib.error.HTTPError as err:
                detail = err.read().decode(errors="replace")[:500]
                if err.code not in RETRY_STATUS:
                    raise GenerationError(f"{url} answered HTTP {err.code}: {detail}") from None
                last = f"HTTP {err.code}: {detail}"
            except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as err:
                last = str(getattr(err, "reason", err)) or type(err).__name__
            except ValueError as err:
                raise ServerError(f"{url} answered with invalid JSON: {err}") from None
        raise ServerError(
            f"OpenAI-compatible server at {url} failed after "
            f"{self.max_retries + 1} attempts: {last}"
        )

    def close(self) -> None:
        """Stop the request threads."""
        self._pool.shutdown(wait=False)
