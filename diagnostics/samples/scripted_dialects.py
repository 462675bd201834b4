"""The frames of a scripted stream, one builder per dialect, and the whole JSON reply of each API:
(frame kind, shape) pairs whose shapes hold the literal content and the markers the rebuild fills
(ids like `chatcmpl-*#1`, `$seq`). Formats follow each provider's public streaming reference:
OpenAI Chat Completions and Responses streaming events (platform.openai.com/docs/api-reference),
Anthropic Messages streaming (docs.anthropic.com/en/docs/build-with-claude/streaming), Gemini
`streamGenerateContent` (ai.google.dev/api/generate-content), Ollama `/api/chat`
(github.com/ollama/ollama, docs/api.md). Pure."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from streamtap.diagnostics.record.shapes import SEQ

MIN_ARGUMENT_PIECES = 8  # so that `at=event:tool_input_delta:5` fires on a default tool call
_WORDS = re.compile(r"\s*\S+\s*|\s+")


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: str  # the JSON text the pieces add up to


def split_text(text: str, pieces: int | None = None) -> list[str]:
    """Word by word; with `pieces`, into that many parts of near-equal length."""
    if not text:
        return []
    if pieces is None:
        return _WORDS.findall(text)
    pieces = max(1, min(pieces, len(text)))
    cuts = [round(i * len(text) / pieces) for i in range(pieces + 1)]
    return [text[start:end] for start, end in zip(cuts, cuts[1:])]


def split_arguments(arguments: str, pieces: int = MIN_ARGUMENT_PIECES) -> list[str]:
    """At least `pieces` parts (JSON whitespace is added inside a short object to make room)."""
    if len(arguments) < pieces and arguments.endswith("}"):
        arguments = arguments[:-1] + " " * (pieces - len(arguments)) + "}"
    return split_text(arguments, pieces)


# -- one frame list per dialect: (kind, shape) ----------------------------------------------------
def _chat(model, text, reasoning, calls, usage, include_usage) -> list[tuple[str, dict]]:
    def chunk(delta: dict, finish: str | None = None, **extra) -> dict:
        return {"id": "chatcmpl-*#1", "object": "chat.completion.chunk", "created": 1700000000,
                "model": model, "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                             "finish_reason": finish}], **extra}

    frames = [("meta", {"json": chunk({"role": "assistant", "content": ""})})]
    frames += [("reasoning_delta", {"json": chunk({"reasoning_content": part})})
               for part in split_text(reasoning)]
    frames += [("text_delta", {"json": chunk({"content": part})}) for part in split_text(text)]
    for index, call in enumerate(calls):
        frames.append(("tool_input_start", {"json": chunk({"tool_calls": [{
            "index": index, "id": f"call_*#{index + 2}", "type": "function",
            "function": {"name": call.name, "arguments": ""}}]})}))
        frames += [("tool_input_delta", {"json": chunk({"tool_calls": [{
            "index": index, "function": {"arguments": part}}]})})
            for part in split_arguments(call.arguments)]
    frames.append(("finish", {"json": chunk({}, "tool_calls" if calls else "stop")}))
    if include_usage:  # only when asked (`stream_options.include_usage`), as OpenAI does
        frames.append(("usage", {"json": {**chunk({}), "choices": [], "usage": {
            "prompt_tokens": usage[0], "completion_tokens": usage[1],
            "total_tokens": sum(usage)}}}))
    frames.append(("meta", {"data": "[DONE]"}))
    return frames


def _responses(model, text, reasoning, calls, usage, include_usage) -> list[tuple[str, dict]]:
    def event(name: str, kind: str = "meta", **fields) -> tuple[str, dict]:
        return kind, {"event": name, "json": {"type": name, "sequence_number": SEQ, **fields}}

    def response(status: str, output: list) -> dict:
        body = {"id": "resp_*#1", "object": "response", "created_at": 1700000000,
                "status": status, "model": model, "output": output, "usage": None}
        if status == "completed":
            body["usage"] = {"input_tokens": usage[0], "output_tokens": usage[1],
                             "total_tokens": sum(usage)}
        return body

    frames = [event("response.created", response=response("in_progress", [])),
              event("response.in_progress", response=response("in_progress", []))]
    output: list[dict] = []
    ordinal = 2
    if reasoning:
        item = {"id": f"rs_*#{ordinal}", "type": "reasoning", "summary": []}
        ordinal += 1
        index = len(output)
        frames.append(event("response.output_item.added", output_index=index, item=item))
        frames += [event("response.reasoning_summary_text.delta", "reasoning_delta",
                         item_id=item["id"], output_index=index, summary_index=0, delta=part)
                   for part in split_text(reasoning)]
        done = {**item, "summary": [{"type": "summary_text", "text": reasoning}]}
        frames.append(event("response.output_item.done", output_index=index, item=done))
        output.append(done)
    if text:
        item_id = f"msg_*#{ordinal}"
        ordinal += 1
        index = len(output)
        frames.append(event("response.output_item.added", output_index=index, item={
            "id": item_id, "type": "message", "status": "in_progress", "role": "assistant",
            "content": []}))
        part = {"type": "output_text", "text": "", "annotations": []}
        frames.append(event("response.content_part.added", item_id=item_id, output_index=index,
                            content_index=0, part=part))
        frames += [event("response.output_text.delta", "text_delta", item_id=item_id,
                         output_index=index, content_index=0, delta=piece)
                   for piece in split_text(text)]
        frames.append(event("response.output_text.done", item_id=item_id, output_index=index,
                            content_index=0, text=text))
        whole = {**part, "text": text}
        frames.append(event("response.content_part.done", item_id=item_id, output_index=index,
                            content_index=0, part=whole))
        done = {"id": item_id, "type": "message", "status": "completed", "role": "assistant",
                "content": [whole]}
        frames.append(event("response.output_item.done", output_index=index, item=done))
        output.append(done)
    for call in calls:
        item = {"id": f"fc_*#{ordinal}", "type": "function_call", "status": "in_progress",
                "arguments": "", "call_id": f"call_*#{ordinal + 1}", "name": call.name}
        ordinal += 2
        index = len(output)
        frames.append(event("response.output_item.added", "tool_input_start",
                            output_index=index, item=item))
        frames += [event("response.function_call_arguments.delta", "tool_input_delta",
                         item_id=item["id"], output_index=index, delta=piece)
                   for piece in split_arguments(call.arguments)]
        frames.append(event("response.function_call_arguments.done", item_id=item["id"],
                            output_index=index, arguments=call.arguments))
        done = {**item, "status": "completed", "arguments": call.arguments}
        frames.append(event("response.output_item.done", "tool_call", output_index=index,
                            item=done))
        output.append(done)
    frames.append(event("response.completed", "finish", response=response("completed", output)))
    return frames


def _anthropic(model, text, reasoning, calls, usage, include_usage) -> list[tuple[str, dict]]:
    def event(name: str, kind: str = "meta", **fields) -> tuple[str, dict]:
        return kind, {"event": name, "json": {"type": name, **fields}}

    frames = [event("message_start", message={
        "id": "msg_*#1", "type": "message", "role": "assistant", "content": [], "model": model,
        "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": usage[0], "output_tokens": 1}})]
    blocks = []
    if reasoning:
        blocks.append(({"type": "thinking", "thinking": "", "signature": ""}, "reasoning_delta",
                       [{"type": "thinking_delta", "thinking": part}
                        for part in split_text(reasoning)]
                       + [{"type": "signature_delta", "signature": "c2lnbmF0dXJl"}]))
    if text:
        blocks.append(({"type": "text", "text": ""}, "text_delta",
                       [{"type": "text_delta", "text": part} for part in split_text(text)]))
    for index, call in enumerate(calls):
        blocks.append(({"type": "tool_use", "id": f"toolu_*#{index + 2}", "name": call.name,
                        "input": {}}, "tool_input_delta",
                       [{"type": "input_json_delta", "partial_json": part}
                        for part in split_arguments(call.arguments)]))
    for index, (block, kind, deltas) in enumerate(blocks):
        start_kind = "tool_input_start" if block["type"] == "tool_use" else "meta"
        frames.append(event("content_block_start", start_kind, index=index, content_block=block))
        frames += [event("content_block_delta", kind, index=index, delta=delta)
                   for delta in deltas]
        frames.append(event("content_block_stop", index=index))
    frames.append(event("message_delta", "finish", delta={
        "stop_reason": "tool_use" if calls else "end_turn", "stop_sequence": None},
        usage={"output_tokens": usage[1]}))
    frames.append(event("message_stop"))
    return frames


def _gemini(model, text, reasoning, calls, usage, include_usage) -> list[tuple[str, dict]]:
    def chunk(parts: list, finish: str | None = None) -> dict:
        candidate: dict = {"content": {"parts": parts, "role": "model"}, "index": 0}
        if finish:
            candidate["finishReason"] = finish
        return {"candidates": [candidate], "usageMetadata": {
            "promptTokenCount": usage[0], "candidatesTokenCount": usage[1],
            "totalTokenCount": sum(usage)}, "modelVersion": model}

    frames = [("reasoning_delta", {"json": chunk([{"text": part, "thought": True}])})
              for part in split_text(reasoning)]
    frames += [("text_delta", {"json": chunk([{"text": part}])}) for part in split_text(text)]
    # Gemini sends each call whole, its arguments an object, never in pieces.
    frames += [("tool_call", {"json": chunk([{"functionCall": {
        "name": call.name, "args": json.loads(call.arguments or "{}")}}])}) for call in calls]
    frames.append(("finish", {"json": chunk([{"text": ""}], "STOP")}))
    return frames


def _ollama(model, text, reasoning, calls, usage, include_usage) -> list[tuple[str, dict]]:
    def line(message: dict, **extra) -> dict:
        return {"model": model, "created_at": "2025-01-01T00:00:00Z",
                "message": {"role": "assistant", "content": "", **message}, "done": False,
                **extra}

    frames = [("reasoning_delta", {"json": line({"thinking": part})})
              for part in split_text(reasoning)]
    frames += [("text_delta", {"json": line({"content": part})}) for part in split_text(text)]
    if calls:  # Ollama sends the calls whole, in one line
        frames.append(("tool_call", {"json": line({"tool_calls": [
            {"function": {"name": call.name, "arguments": json.loads(call.arguments or "{}")}}
            for call in calls]})}))
    frames.append(("finish", {"json": {**line({}), "done": True, "done_reason": "stop",
                                       "total_duration": 1000000, "prompt_eval_count": usage[0],
                                       "eval_count": usage[1]}}))
    return frames


STREAMS = {"openai-chat": _chat, "openai-responses": _responses,
            "anthropic-messages": _anthropic, "gemini": _gemini, "ollama-ndjson": _ollama}


# -- whole (non-streamed) replies -----------------------------------------------------------------
def body(dialect: str, model: str, text: str, reasoning: str, calls: list[ToolCall],
         usage: tuple[int, int]) -> dict:
    """The JSON reply of a request with `stream` off, in the dialect's own shape."""
    if dialect == "openai-chat":
        message: dict = {"role": "assistant", "content": text or None}
        if calls:
            message["tool_calls"] = [{"id": f"call_*#{i + 2}", "type": "function",
                                      "function": {"name": c.name, "arguments": c.arguments}}
                                     for i, c in enumerate(calls)]
        return {"id": "chatcmpl-*#1", "object": "chat.completion", "created": 1700000000,
                "model": model, "choices": [{"index": 0, "message": message, "logprobs": None,
                                             "finish_reason": "tool_calls" if calls else "stop"}],
                "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1],
                          "total_tokens": sum(usage)}}
    if dialect == "openai-responses":
        output: list[dict] = []
        if text:
            output.append({"id": "msg_*#2", "type": "message", "status": "completed",
                           "role": "assistant", "content": [
                               {"type": "output_text", "text": text, "annotations": []}]})
        output += [{"id": f"fc_*#{i + 3}", "type": "function_call", "status": "completed",
                    "arguments": c.arguments, "call_id": f"call_*#{i + 3}", "name": c.name}
                   for i, c in enumerate(calls)]
        return {"id": "resp_*#1", "object": "response", "created_at": 1700000000,
                "status": "completed", "model": model, "output": output,
                "usage": {"input_tokens": usage[0], "output_tokens": usage[1],
                          "total_tokens": sum(usage)}}
    if dialect == "anthropic-messages":
        content = [{"type": "text", "text": text}] if text else []
        content += [{"type": "tool_use", "id": f"toolu_*#{i + 2}", "name": c.name,
                     "input": json.loads(c.arguments or "{}")} for i, c in enumerate(calls)]
        return {"id": "msg_*#1", "type": "message", "role": "assistant", "model": model,
                "content": content, "stop_reason": "tool_use" if calls else "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": usage[0], "output_tokens": usage[1]}}
    if dialect == "gemini":
        parts = [{"text": text}] if text else []
        parts += [{"functionCall": {"name": c.name, "args": json.loads(c.arguments or "{}")}}
                  for c in calls]
        return {"candidates": [{"content": {"parts": parts, "role": "model"},
                                "finishReason": "STOP", "index": 0}],
                "usageMetadata": {"promptTokenCount": usage[0],
                                  "candidatesTokenCount": usage[1],
                                  "totalTokenCount": sum(usage)}, "modelVersion": model}
    message = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = [{"function": {"name": c.name,
                                               "arguments": json.loads(c.arguments or "{}")}}
                                 for c in calls]
    return {"model": model, "created_at": "2025-01-01T00:00:00Z", "message": message,
            "done": True, "done_reason": "stop", "prompt_eval_count": usage[0],
            "eval_count": usage[1]}
