"""Small content-free streams for the end-to-end tests (the dialect tests have fuller fixtures)."""

from __future__ import annotations

import json

CANARY_OUTPUT = "CANARY-OUTPUT-5d1e"
CANARY_ARG = "CANARY-ARG-77b0"


def sse(obj: object, event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    data = obj if isinstance(obj, str) else json.dumps(obj)
    return f"{head}data: {data}\n\n".encode()


def chat_chunk(delta: dict, finish: str | None = None, **extra) -> bytes:
    return sse({"id": "chatcmpl-e2e1", "object": "chat.completion.chunk", "created": 1,
                "model": "gpt-test", "choices": [{"index": 0, "delta": delta,
                                                   "finish_reason": finish}], **extra})


def chat_text_stream(words: int = 5, done: bool = True) -> list[bytes]:
    chunks = [chat_chunk({"role": "assistant", "content": ""})]
    chunks += [chat_chunk({"content": f"{CANARY_OUTPUT} w{i} "}) for i in range(words)]
    chunks.append(chat_chunk({}, "stop"))
    if done:
        chunks.append(b"data: [DONE]\n\n")
    return chunks


# Issue 27: a GPUStack server ended a 444 KB answer with its error on an SSE `error:` field line,
# which EventSource clients ignore, then closed without `[DONE]`. Rebuilt here, content-free.
ERROR_FIELD_LINE = (b'error: {"detail":"failed to decode the upstream response","error":'
                    b'{"message":"failed to decode the upstream response","type":"server_error",'
                    b'"code":500}}\n\n')


def chat_then_error_field(total_bytes: int = 444_000) -> list[bytes]:
    """A chat text stream of about `total_bytes`, then ERROR_FIELD_LINE (no finish, no [DONE])."""
    chunks = [chat_chunk({"role": "assistant", "content": ""})]
    size, i = len(chunks[0]), 0
    while size < total_bytes:
        chunks.append(chat_chunk({"content": f"{CANARY_OUTPUT} w{i} "}))
        size += len(chunks[-1])
        i += 1
    return chunks + [ERROR_FIELD_LINE]


def chat_tool_stream(arg_chunks: int = 5, finish: bool = True, name: str = "apply_patch"):
    chunks = [chat_chunk({"role": "assistant", "content": None, "tool_calls": [
        {"index": 0, "id": "call_e2e1", "type": "function",
         "function": {"name": name, "arguments": ""}}]})]
    pieces = ['{"patch": "', CANARY_ARG, " more", " text", '"}'] + [" "] * max(arg_chunks - 5, 0)
    for piece in pieces[:arg_chunks]:
        chunks.append(chat_chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}))
    if finish:
        chunks.append(chat_chunk({}, "tool_calls"))
        chunks.append(b"data: [DONE]\n\n")
    return chunks


def anthropic_text_stream(words: int = 3) -> list[bytes]:
    chunks = [sse({"type": "message_start", "message": {
        "id": "msg_e2e1", "type": "message", "role": "assistant", "model": "claude-test",
        "content": [], "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 1}}}, "message_start"),
        sse({"type": "content_block_start", "index": 0,
             "content_block": {"type": "text", "text": ""}}, "content_block_start"),
        sse({"type": "ping"}, "ping")]
    chunks += [sse({"type": "content_block_delta", "index": 0,
                    "delta": {"type": "text_delta", "text": f"{CANARY_OUTPUT} {i} "}},
                   "content_block_delta") for i in range(words)]
    chunks += [sse({"type": "content_block_stop", "index": 0}, "content_block_stop"),
               sse({"type": "message_delta", "delta": {"stop_reason": "end_turn",
                                                       "stop_sequence": None},
                    "usage": {"output_tokens": 12}}, "message_delta"),
               sse({"type": "message_stop"}, "message_stop")]
    return chunks


def responses_event(obj: dict, seq: list[int]) -> bytes:
    obj = {**obj, "sequence_number": seq[0]}
    seq[0] += 1
    return sse(obj, obj["type"])


def responses_text_stream(words: int = 3, terminal: bool = True) -> list[bytes]:
    """An OpenAI Responses stream with one message item (the documented event sequence)."""
    seq = [0]
    response = {"id": "resp_e2e1", "object": "response", "created_at": 1, "status": "in_progress",
                "model": "gpt-test", "output": []}
    chunks = [responses_event({"type": "response.created", "response": response}, seq),
              responses_event({"type": "response.in_progress", "response": response}, seq),
              responses_event({"type": "response.output_item.added", "output_index": 0, "item": {
                  "id": "msg_e2e1", "type": "message", "status": "in_progress",
                  "role": "assistant", "content": []}}, seq),
              responses_event({"type": "response.content_part.added", "item_id": "msg_e2e1",
                               "output_index": 0, "content_index": 0,
                               "part": {"type": "output_text", "text": "", "annotations": []}},
                              seq)]
    chunks += [responses_event({"type": "response.output_text.delta", "item_id": "msg_e2e1",
                                "output_index": 0, "content_index": 0,
                                "delta": f"{CANARY_OUTPUT} {i} "}, seq) for i in range(words)]
    chunks.append(responses_event({"type": "response.output_text.done", "item_id": "msg_e2e1",
                                   "output_index": 0, "content_index": 0,
                                   "text": CANARY_OUTPUT}, seq))
    if terminal:
        done = {**response, "status": "completed", "usage": {
            "input_tokens": 5, "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 7, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 12}}
        chunks.append(responses_event({"type": "response.completed", "response": done}, seq))
    return chunks
