"""Shared helpers for the end-to-end suites: stream builders the lead's `tests/streams.py` does not
have (OpenAI Responses), readers that never hang, and ways to look at a trace directory and the
proxy's JSON log."""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from pathlib import Path

import httpx

from tests.streams import CANARY_ARG, CANARY_OUTPUT, sse

RESPONSE_ID = "resp_e2e1"
# What points an SDK somewhere: a test that lets streamtap set them starts without them.
PROVIDER_ENV = ("OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY")


def env_without_providers(path_first: str | None = None) -> dict[str, str]:
    """This process's environment without PROVIDER_ENV (and with `path_first` at the head of
    PATH, when given)."""
    env = {name: value for name, value in os.environ.items() if name not in PROVIDER_ENV}
    if path_first:
        env["PATH"] = path_first + os.pathsep + env.get("PATH", "")
    return env


# -- OpenAI Responses streams (the documented event sequence) --------------------------------------
def _response(status: str, output: list, usage: dict | None = None) -> dict:
    return {"id": RESPONSE_ID, "object": "response", "created_at": 1, "status": status,
            "model": "gpt-test", "output": output, "parallel_tool_calls": True,
            "tool_choice": "auto", "tools": [], "error": None, "incomplete_details": None,
            "usage": usage}


def responses_text_stream(words: int = 3, call_name: str | None = None) -> list[bytes]:
    """`response.created` ... text deltas ... (a function call) ... `response.completed`.

    Every frame has `event: <type>` and a `data:` whose `type` equals it, plus a
    `sequence_number`; deltas carry an `obfuscation` field as OpenAI sends by default.
    """
    frames: list[tuple[str, dict]] = []
    text = "".join(f"{CANARY_OUTPUT} {i} " for i in range(words))
    message = {"id": "msg_e2e1", "type": "message", "status": "in_progress", "role": "assistant",
               "content": []}
    part = {"type": "output_text", "text": "", "annotations": []}
    frames.append(("response.created", {"response": _response("in_progress", [])}))
    frames.append(("response.in_progress", {"response": _response("in_progress", [])}))
    frames.append(("response.output_item.added", {"output_index": 0, "item": message}))
    frames.append(("response.content_part.added", {"item_id": "msg_e2e1", "output_index": 0,
                                                   "content_index": 0, "part": part}))
    for i in range(words):
        frames.append(("response.output_text.delta", {
            "item_id": "msg_e2e1", "output_index": 0, "content_index": 0,
            "delta": f"{CANARY_OUTPUT} {i} ", "obfuscation": "Zx9", "logprobs": []}))
    done_part = {**part, "text": text}
    frames.append(("response.output_text.done", {"item_id": "msg_e2e1", "output_index": 0,
                                                 "content_index": 0, "text": text,
                                                 "logprobs": []}))
    frames.append(("response.content_part.done", {"item_id": "msg_e2e1", "output_index": 0,
                                                  "content_index": 0, "part": done_part}))
    done_message = {**message, "status": "completed", "content": [done_part]}
    frames.append(("response.output_item.done", {"output_index": 0, "item": done_message}))
    output = [done_message]
    if call_name:
        call = {"type": "function_call", "id": "fc_e2e1", "call_id": "call_e2e1",
                "name": call_name, "arguments": "", "status": "in_progress"}
        frames.append(("response.output_item.added", {"output_index": 1, "item": call}))
        pieces = ['{"patch": "', CANARY_ARG, '"}']
        for piece in pieces:
            frames.append(("response.function_call_arguments.delta", {
                "item_id": "fc_e2e1", "output_index": 1, "delta": piece, "obfuscation": "q"}))
        arguments = "".join(pieces)
        frames.append(("response.function_call_arguments.done", {
            "item_id": "fc_e2e1", "output_index": 1, "arguments": arguments}))
        done_call = {**call, "arguments": arguments, "status": "completed"}
        frames.append(("response.output_item.done", {"output_index": 1, "item": done_call}))
        output.append(done_call)
    usage = {"input_tokens": 7, "input_tokens_details": {"cached_tokens": 0},
             "output_tokens": words, "output_tokens_details": {"reasoning_tokens": 0},
             "total_tokens": 7 + words}
    frames.append(("response.completed", {"response": _response("completed", output, usage)}))
    return [sse({"type": name, "sequence_number": seq, **data}, name)
            for seq, (name, data) in enumerate(frames)]


def keepalive_stream(count: int) -> list[bytes]:
    """SSE comments only: bytes keep flowing, the model makes no progress."""
    return [b": keepalive\n\n"] * count


# -- reading without hanging ----------------------------------------------------------------------
class BackgroundRead:
    """Reads one streamed response with httpx on a thread. `.started` is set once the first bytes
    arrived; `.join()` returns what the client saw: (bytes, exception class or None)."""

    def __init__(self, url: str, headers: dict | None = None, body: dict | None = None,
                 timeout: float = 15.0):
        self.url, self.headers, self.body, self.timeout = url, headers or {}, body, timeout
        self.started = threading.Event()
        self.received = 0
        self.status: int | None = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            with httpx.Client(timeout=self.timeout) as client:
                with client.stream("POST", self.url, json=self.body or {"stream": True},
                                   headers=self.headers) as resp:
                    self.status = resp.status_code
                    for chunk in resp.iter_raw():
                        self.received += len(chunk)
                        self.started.set()
        except Exception as exc:  # what the client saw is the result
            self.error = exc
        finally:
            self.started.set()

    def join(self, timeout: float = 15.0) -> tuple[int, type | None]:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), f"the client read of {self.url} did not end"
        return self.received, type(self.error) if self.error else None


class RawClient:
    """HTTP/1.1 on a plain socket: the test decides when (and whether) it reads."""

    def __init__(self, port: int, rcvbuf: int | None = None, timeout: float = 30.0):
        self.sock = socket.socket()
        if rcvbuf:  # set before connecting: a small fixed buffer, no autotuning
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(timeout)
        self.sock.connect(("127.0.0.1", port))
        self.buf = b""

    def close(self) -> None:
        self.sock.close()

    def request(self, path: str, session: str, body: bytes = b'{"stream": true}') -> None:
        head = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\nx-streamtap-session: {session}\r\n\r\n")
        self.sock.sendall(head.encode() + body)

    def _fill(self) -> None:
        data = self.sock.recv(256 * 1024)
        if not data:
            raise EOFError("the proxy closed the connection")
        self.buf += data

    def _line(self) -> bytes:
        while b"\r\n" not in self.buf:
            self._fill()
        line, _, self.buf = self.buf.partition(b"\r\n")
        return line

    def _take(self, n: int) -> bytes:
        while len(self.buf) < n:
            self._fill()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def head(self) -> tuple[int, dict[str, str]]:
        status = int(self._line().split()[1])
        headers = {}
        while line := self._line():
            name, _, value = line.decode().partition(":")
            headers[name.strip().lower()] = value.strip()
        return status, headers

    def body(self, headers: dict[str, str]):
        """The body as it arrives, de-chunked; stops at its end (the connection stays open)."""
        if headers.get("transfer-encoding") == "chunked":
            while size := int(self._line().split(b";")[0], 16):
                yield self._take(size)
                self._line()
            while self._line():  # trailers, then the blank line
                pass
            return
        left = int(headers["content-length"])
        while left:
            if not self.buf:
                self._fill()
            piece, self.buf = self.buf[:left], self.buf[left:]
            left -= len(piece)
            yield piece


def raw_request(port: int, request: bytes, timeout: float = 10.0) -> bytes:
    """Send bytes on a fresh loopback connection and return everything until the server closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(request)
        data = b""
        try:
            while chunk := sock.recv(65536):
                data += chunk
        except ConnectionResetError:
            pass
    return data


# -- the trace directory and the log --------------------------------------------------------------
def all_files(root: Path) -> list[Path]:
    """Every regular file below `root` (hidden ones and temp files included)."""
    found = []
    for folder, _dirs, files in os.walk(root):
        found += [Path(folder) / name for name in files]
    return sorted(found)


def find_record(trace_dir: Path, message_id: str, session: str | None = None,
                timeout: float = 10.0) -> tuple[Path, dict]:
    """The record whose `message_id` is `message_id` (in `session`'s folder, or any folder)."""
    deadline = time.monotonic() + timeout
    while True:
        pattern = f"{session}/*.json" if session else "*/*.json"
        for path in trace_dir.glob(pattern):
            try:
                record = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            if record.get("message_id") == message_id:
                return path, record
        if time.monotonic() > deadline:
            folders = sorted(p.name for p in trace_dir.iterdir()) if trace_dir.is_dir() else []
            raise AssertionError(f"no record with message_id {message_id!r} under {trace_dir} "
                                 f"(session {session!r}; folders {folders})")
        time.sleep(0.02)


def log_events(log_text: str, event: str | None = None) -> list[dict]:
    """The JSON lines of a proxy log (other lines skipped), optionally only one event's."""
    events = []
    for line in log_text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if event is None or entry.get("event") == event:
            events.append(entry)
    return events


def wait_for(predicate, timeout: float = 10.0, interval: float = 0.02):
    """Poll `predicate` until it returns something truthy; return it (or the last falsy value)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval)
