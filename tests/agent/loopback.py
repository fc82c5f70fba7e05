"""A small LLM server on 127.0.0.1 that speaks the OpenAI and Anthropic APIs, for tests and offline runs.

It serves `POST /v1/chat/completions` (OpenAI Chat Completions, so also `provider: openai-compatible`) and
`POST /v1/messages` (Anthropic Messages), one thread per request, on a free port. The real `openai` and
`anthropic` SDKs talk to it over real HTTP, so retries, timeouts and error mapping are exercised end to end.

Scripted use (unit tests): queue what the next requests get, in order; once the queue is empty, requests get
the default "smart" answer.

    from tests.agent.loopback import LoopbackLLM, Reply, Fail, Drop

    with LoopbackLLM() as llm:                     # start() ... stop()
        llm.script(Fail(429, retry_after=1), Reply("hello", tokens_in=10, tokens_out=2))
        cfg = LLMConfig(provider="openai-compatible", model="m", base_url=llm.openai_base_url)
        ...                                        # llm.requests: what the server saw, in order

    Reply(text, finish="stop"|"length"|"refusal", tokens_in=None, tokens_out=None, delay_s=0)
        a 200; `finish` is translated per API (length -> "length" / "max_tokens"; refusal -> OpenAI's
        `message.refusal` field / Anthropic's "refusal" stop reason); tokens default to len(text) // 4 + 1;
        `delay_s` sleeps before answering (a client whose timeout is shorter sees a timeout).
    Fail(status, message="...", retry_after=None, headers=None)
        an error status with the vendor's JSON error body and, if given, a Retry-After header.
    Drop()
        closes the connection without answering (a dropped connection).
    A callable taking the `Seen` request and returning one of the above also works.

Smart mode (end-to-end runs, `provider: openai-compatible` with `base_url: <llm.openai_base_url>`):
- a request whose messages mention `"ideas"` (the idea writer's JSON contract) gets valid ideas JSON, a
  ```json fence holding `{"ideas": [...]}` with as many ideas as the prompt asks for ("N ideas", default 4),
  titled "Loopback idea <k>" with k counting up across calls, so ideas differ between rounds;
  `ideas_for(messages, n) -> list[dict]` replaces them;
- any other request is a coder request and gets "Here is the kernel:" and a ```python block holding
  `code_for(messages)`; by default that is the last ```python block of the prompt (the seed kernel, returned
  unchanged, which is a correct kernel) or, if the prompt has none, a comment saying so.
`messages` is the OpenAI-style list of {"role", "content"} dicts (Anthropic's `system` comes first).

`require_key="..."` makes every request without that key (`Authorization: Bearer`, or Anthropic's older
`x-api-key`) a 401 whose body echoes the key it got, in full, as a careless server might.
"""
from __future__ import annotations

import json
import re
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Union

_PY_BLOCK = re.compile(r"```(?:python|py)[^\n]*\n(.*?)^```", re.DOTALL | re.MULTILINE)
_N_IDEAS = re.compile(r"\b(\d+)\s+(?:(?:new|distinct|different|more|optimization)\s+)*ideas\b", re.IGNORECASE)


@dataclass
class Reply:
    text: str
    finish: str = "stop"               # stop | length | refusal
    tokens_in: int | None = None
    tokens_out: int | None = None
    delay_s: float = 0.0


@dataclass
class Fail:
    status: int
    message: str = "scripted failure"
    retry_after: float | None = None
    headers: dict[str, str] | None = None


@dataclass
class Drop:
    pass


@dataclass
class Seen:
    """One request the server received."""

    api: str                           # "openai" | "anthropic"
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    at: float                          # time.monotonic() when it arrived
    messages: list[dict[str, str]] = field(default_factory=list)


Action = Union[Reply, Fail, Drop, Callable[[Seen], Union[Reply, Fail, Drop]]]


def _default_code(messages: list[dict[str, str]]) -> str:
    for m in reversed(messages):
        blocks = _PY_BLOCK.findall(m.get("content", ""))
        if blocks:
            return blocks[-1]
    return "# the loopback server found no ```python block in the prompt to return\n"


class LoopbackLLM:
    def __init__(self, *, code_for: Callable[[list[dict[str, str]]], str] | None = None,
                 ideas_for: Callable[[list[dict[str, str]], int], list[dict[str, str]]] | None = None,
                 require_key: str | None = None, host: str = "127.0.0.1"):
        self.code_for = code_for or _default_code
        self.ideas_for = ideas_for
        self.require_key = require_key
        self.requests: list[Seen] = []
        self._queue: deque[Action] = deque()
        self._lock = threading.Lock()
        self._idea_counter = 0
        self._host = host
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle

    def start(self) -> "LoopbackLLM":
        handler = type("_Handler", (_Handler,), {"llm": self})
        self._server = ThreadingHTTPServer((self._host, 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02},
                                        name="loopback-llm", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> "LoopbackLLM":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        assert self._server is not None, "LoopbackLLM is not started"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def openai_base_url(self) -> str:
        """For `provider: openai` / `openai-compatible`: the SDK appends /chat/completions."""
        return self.url + "/v1"

    @property
    def anthropic_base_url(self) -> str:
        """For `provider: anthropic`: the SDK appends /v1/messages."""
        return self.url

    # -- scripting

    def script(self, *actions: Action) -> None:
        with self._lock:
            self._queue.extend(actions)

    def pending(self) -> int:
        with self._lock:
            return len(self._queue)

    def count(self, api: str | None = None) -> int:
        with self._lock:
            return sum(1 for r in self.requests if api is None or r.api == api)

    # -- answering

    def _next(self, seen: Seen) -> Reply | Fail | Drop:
        with self._lock:
            self.requests.append(seen)
            action = self._queue.popleft() if self._queue else None
        if action is None:
            return self._smart(seen)
        if callable(action) and not isinstance(action, (Reply, Fail, Drop)):
            return action(seen)
        return action

    def _smart(self, seen: Seen) -> Reply:
        text_all = "\n".join(m["content"] for m in seen.messages)
        if '"ideas"' in text_all:
            last_user = next((m["content"] for m in reversed(seen.messages) if m["role"] == "user"), "")
            found = _N_IDEAS.search(last_user) or _N_IDEAS.search(text_all)
            n = int(found.group(1)) if found else 4
            if self.ideas_for is not None:
                ideas = self.ideas_for(seen.messages, n)
            else:
                with self._lock:
                    first = self._idea_counter + 1
                    self._idea_counter += n
                ideas = [{"title": f"Loopback idea {k}",
                          "description": f"Loopback idea number {k}: keep the kernel, vary its launch."}
                         for k in range(first, first + n)]
            return Reply("```json\n" + json.dumps({"ideas": ideas}, indent=2) + "\n```\n")
        code = self.code_for(seen.messages)
        return Reply("Here is the kernel:\n\n```python\n" + code.rstrip("\n") + "\n```\n")


def _messages_of(api: str, body: dict[str, Any]) -> list[dict[str, str]]:
    def text(content: Any) -> str:
        if isinstance(content, str):
            return content
        if isinstance(content, list):  # content blocks
            return "".join(b.get("text", "") for b in content if isinstance(b, dict))
        return ""

    out: list[dict[str, str]] = []
    if api == "anthropic" and body.get("system"):
        out.append({"role": "system", "content": text(body["system"])})
    for m in body.get("messages", []):
        out.append({"role": m.get("role", "user"), "content": text(m.get("content"))})
    return out


class _Handler(BaseHTTPRequestHandler):
    llm: LoopbackLLM
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet; tests read .requests
        pass

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        path = self.path.split("?")[0]
        api = {"/v1/chat/completions": "openai", "/v1/messages": "anthropic"}.get(path)
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        if api is None:
            self._send(404, {"error": {"message": f"no route {path}", "type": "not_found"}})
            return
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            self._send(400, {"error": {"message": "body is not JSON", "type": "invalid_request_error"}})
            return
        headers = {k.lower(): v for k, v in self.headers.items()}
        seen = Seen(api=api, path=path, headers=headers, body=body, at=time.monotonic(),
                    messages=_messages_of(api, body))
        llm = self.llm
        if llm.require_key is not None:
            # Anthropic's SDK 2.x sends the key as a Bearer token too; older ones used x-api-key.
            got = headers.get("authorization", "").removeprefix("Bearer ") or headers.get("x-api-key", "")
            if got != llm.require_key:
                with llm._lock:
                    llm.requests.append(seen)
                self._fail(api, Fail(401, f"Incorrect API key provided: {got}"))
                return
        action = llm._next(seen)
        if isinstance(action, Drop):
            self.close_connection = True
            return
        if isinstance(action, Fail):
            self._fail(api, action)
            return
        if action.delay_s:
            time.sleep(action.delay_s)
        self._reply(api, seen, action)

    # -- writing

    def _send(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (a timeout test)
            self.close_connection = True

    def _fail(self, api: str, fail: Fail) -> None:
        headers = dict(fail.headers or {})
        if fail.retry_after is not None:
            headers["retry-after"] = f"{fail.retry_after:g}"
        kind = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                404: "not_found_error", 429: "rate_limit_error", 529: "overloaded_error"}.get(fail.status,
                                                                                               "api_error")
        if api == "anthropic":
            payload = {"type": "error", "error": {"type": kind, "message": fail.message}}
        else:
            payload = {"error": {"message": fail.message, "type": kind, "param": None, "code": None}}
        self._send(fail.status, payload, headers)

    def _reply(self, api: str, seen: Seen, r: Reply) -> None:
        model = seen.body.get("model", "unknown")
        tin = r.tokens_in if r.tokens_in is not None else \
            sum(len(m["content"]) for m in seen.messages) // 4 + 1
        tout = r.tokens_out if r.tokens_out is not None else len(r.text) // 4 + 1
        if api == "anthropic":
            stop = {"stop": "end_turn", "length": "max_tokens", "refusal": "refusal"}[r.finish]
            payload: dict[str, Any] = {
                "id": f"msg_loopback_{len(self.llm.requests)}", "type": "message", "role": "assistant",
                "model": model, "content": [{"type": "text", "text": r.text}], "stop_reason": stop,
                "stop_sequence": None, "usage": {"input_tokens": tin, "output_tokens": tout},
            }
        else:
            refused = r.finish == "refusal"
            payload = {
                "id": f"chatcmpl-loopback-{len(self.llm.requests)}", "object": "chat.completion",
                "created": int(time.time()), "model": model,
                "choices": [{"index": 0, "finish_reason": "length" if r.finish == "length" else "stop",
                             "message": {"role": "assistant", "content": None if refused else r.text,
                                         "refusal": r.text if refused else None}}],
                "usage": {"prompt_tokens": tin, "completion_tokens": tout, "total_tokens": tin + tout},
            }
        self._send(200, payload)
