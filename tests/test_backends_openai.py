"""openai backend against a small OpenAI-compatible server started on 127.0.0.1 in the test."""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from metaagentx.backends.base import GenerationError, SamplingParams
from metaagentx.backends.openai import OpenAIGenerator, ServerError
from metaagentx.backends.text import ByteTokenizer


class FakeServer:
    """A real HTTP server speaking the two endpoints; behaviour set per test."""

    def __init__(self):
        self.requests: list[tuple[str, dict, str]] = []
        self.fail_next = 0  # answer this many requests with HTTP 503 first
        self.delay_s = 0.0
        self.status = 200
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append((self.path, body, self.headers.get("Authorization", "")))
                time.sleep(server.delay_s)
                if server.fail_next > 0:
                    server.fail_next -= 1
                    return self._send(503, {"error": "busy"})
                if server.status != 200:
                    return self._send(server.status, {"error": {"message": "bad model name"}})
                return self._send(200, server.answer(self.path, body))

            def _send(self, code, obj):
                data = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                with contextlib.suppress(BrokenPipeError):  # client gave up (timeout test)
                    self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, args=(0.02,), daemon=True).start()

    def answer(self, path, body):
        if path.endswith("/chat/completions"):
            text = "echo: " + body["messages"][-1]["content"]
            finish = "length" if body["max_tokens"] < len(text) else "stop"
            text = text[: body["max_tokens"]]
            content = [{"token": c, "logprob": -0.5 - i / 100} for i, c in enumerate(text)]
            return {
                "choices": [
                    {
                        "message": {"role": "assistant", "content": text},
                        "logprobs": {"content": content},
                        "finish_reason": finish,
                    }
                ]
            }
        tokens = ["token_id:7", "token_id:8"] if body.get("return_tokens_as_token_ids") else []
        return {
            "choices": [
                {
                    "text": "ok",
                    "finish_reason": "stop",
                    "logprobs": {"tokens": tokens, "token_logprobs": [-0.25, -0.75]},
                }
            ]
        }

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    s = FakeServer()
    yield s
    s.close()


def test_chat_roundtrip_and_protocol(server):
    gen = OpenAIGenerator(server.url, "served-model", api_key="k123")
    msgs = [{"role": "user", "content": "hi there"}]
    params = SamplingParams(temperature=0.3, top_p=0.9, max_new_tokens=50, seed=4, stop=("\n",))
    out = asyncio.run(gen.generate(gen.render(msgs), params))
    path, body, auth = server.requests[0]
    assert path == "/v1/chat/completions" and auth == "Bearer k123"
    assert body["messages"] == msgs and body["model"] == "served-model"
    assert (body["temperature"], body["top_p"], body["max_tokens"], body["seed"], body["stop"]) == (
        0.3,
        0.9,
        50,
        4,
        ["\n"],
    )
    assert out.text == "echo: hi there" and out.finish_reason == "stop"
    assert out.token_ids == ByteTokenizer().encode("echo: hi there")
    assert out.logprobs[:2] == [-0.5, -0.51]  # the server's values, one per byte token
    short = asyncio.run(gen.chat(msgs, SamplingParams(max_new_tokens=4)))
    assert short.text == "echo" and short.finish_reason == "length"


def test_completions_with_token_id_extension_and_text_prompt(server):
    gen = OpenAIGenerator(server.url, "m", token_ids=True)
    out = asyncio.run(gen.generate(ByteTokenizer().encode("2+2="), SamplingParams()))
    path, body, _ = server.requests[0]
    assert path == "/v1/completions" and body["prompt"] == "2+2="
    assert body["include_stop_str_in_output"] is True
    assert out.token_ids == [7, 8] and out.logprobs == [-0.25, -0.75]
    plain = OpenAIGenerator(server.url, "m")
    out = asyncio.run(plain.complete("2+2=", SamplingParams()))
    assert out.token_ids == [111, 107]  # "ok" re-encoded; server logprobs count matches
    assert out.logprobs == [-0.25, -0.75]
    server_tokens_missing = plain._result([], "okay", [], [-0.1], "stop")
    assert all(math.isnan(v) for v in server_tokens_missing.logprobs)  # unknown, not faked


def test_retries_with_backoff_then_success(server):
    server.fail_next = 2
    gen = OpenAIGenerator(server.url, "m", max_retries=3, backoff_s=0.01)
    out = asyncio.run(gen.chat([{"role": "user", "content": "x"}], SamplingParams()))
    assert out.text == "echo: x" and len(server.requests) == 3
    server.fail_next = 5
    gen = OpenAIGenerator(server.url, "m", max_retries=1, backoff_s=0.01)
    with pytest.raises(ServerError, match="503"):
        asyncio.run(gen.chat([{"role": "user", "content": "x"}], SamplingParams()))


def test_client_error_is_not_retried(server):
    server.status = 404
    gen = OpenAIGenerator(server.url, "nope", max_retries=3, backoff_s=0.01)
    with pytest.raises(GenerationError, match="HTTP 404.*bad model name"):
        asyncio.run(gen.chat([{"role": "user", "content": "x"}], SamplingParams()))
    assert len(server.requests) == 1


def test_unreachable_server_names_the_url():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    gen = OpenAIGenerator(url, "m", max_retries=1, backoff_s=0.01, timeout_s=2)
    with pytest.raises(ServerError, match=f"127.0.0.1:{port}/v1/chat/completions"):
        asyncio.run(gen.chat([{"role": "user", "content": "x"}], SamplingParams()))


def test_timeout_is_an_error(server):
    server.delay_s = 1.0
    gen = OpenAIGenerator(server.url, "m", max_retries=0, timeout_s=0.1)
    with pytest.raises(ServerError, match="timed out"):
        asyncio.run(gen.chat([{"role": "user", "content": "x"}], SamplingParams()))


def test_concurrent_requests(server):
    gen = OpenAIGenerator(server.url, "m", max_concurrency=8)

    async def main():
        return await asyncio.gather(
            *(gen.chat([{"role": "user", "content": str(i)}], SamplingParams()) for i in range(8))
        )

    outs = asyncio.run(main())
    assert [o.text for o in outs] == [f"echo: {i}" for i in range(8)]
    assert gen.calls == 8


def test_load_generator_builds_openai_from_config(server, monkeypatch):
    from metaagentx.backends import load_generator
    from metaagentx.config import load_config

    monkeypatch.setenv("MY_KEY", "sekret")
    cfg = load_config(
        None,
        [
            "--generation.backend=openai",
            f"--generation.openai_base_url={server.url}",
            "--generation.openai_api_key_env=MY_KEY",
            "--model.name=teacher",
        ],
    )
    gen = load_generator(cfg)
    out = asyncio.run(gen.chat([{"role": "user", "content": "q"}], SamplingParams()))
    _, body, auth = server.requests[0]
    assert out.text == "echo: q" and body["model"] == "teacher" and auth == "Bearer sekret"
