"""Scripted streams: a sample written from a description (text, reasoning, tool calls, an ending
and where it happens) instead of recorded, so the fake provider can play it with the same rebuild
and endings that replay uses. Pure: it returns a sample dict.

Frame shapes hold the literal content (the rebuild keeps literal strings and fills only markers:
ids like `chatcmpl-*#1`, `$seq`), frames carry no size (nothing to pad to), and the place an
ending happens is found by the trigger scanner fault injection uses, reading the rebuilt bytes
with the dialect (so `at="event:tool_input_delta:5"` means here what it means in a fault rule).
Formats follow each provider's public streaming reference: OpenAI Chat Completions and Responses
streaming events (platform.openai.com/docs/api-reference), Anthropic Messages streaming
(docs.anthropic.com/en/docs/build-with-claude/streaming), Gemini `streamGenerateContent`
(ai.google.dev/api/generate-content), Ollama `/api/chat` (github.com/ollama/ollama docs/api.md).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from streamtap.diagnostics.decode.triggers import FrameScanner, TriggerError, parse_trigger
from streamtap.diagnostics.dialects import choose_dialect
from streamtap.diagnostics.record.shapes import SEQ
from streamtap.diagnostics.samples.rebuild import FILLER, rebuild
from streamtap.diagnostics.samples.samples import ENDINGS, SAMPLE_SCHEMA_VERSION

DIALECTS = ("openai-chat", "openai-responses", "anthropic-messages", "gemini", "ollama-ndjson")
PATHS = {"openai-chat": "/v1/chat/completions", "openai-responses": "/v1/responses",
         "anthropic-messages": "/v1/messages",
         "gemini": "/v1beta/models/{model}:streamGenerateContent",
         "ollama-ndjson": "/api/chat"}
SCRIPTED_ENDINGS = tuple(ending for ending in ENDINGS if ending != "client_gone")
DEFAULT_TEXT = (FILLER * 3).strip()  # 15 words: a text answer of at least 10 deltas
MIN_ARGUMENT_PIECES = 8  # so that `at=event:tool_input_delta:5` fires on a default tool call
DEFAULT_MODEL = "streamtap-fake"
_STREAM_TYPES = {"ollama-ndjson": "application/x-ndjson"}
_WORDS = re.compile(r"\s*\S+\s*|\s+")


class ScriptError(ValueError):
    """A script that cannot become a stream; says what to change."""


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


def tool_calls_from(calls: list | tuple | None) -> list[ToolCall]:
    out = []
    for index, call in enumerate(calls or ()):
        if isinstance(call, ToolCall):
            out.append(call)
            continue
        if not isinstance(call, dict) or not isinstance(call.get("name"), str):
            raise ScriptError(f"tool_calls[{index}]: expected {{'name': str, 'arguments': "
                              f"{{...}}}}, got {call!r}")
        arguments = call.get("arguments", {})
        text = arguments if isinstance(arguments, str) else json.dumps(arguments)
        out.append(ToolCall(call["name"], text))
    return out


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


_STREAMS = {"openai-chat": _chat, "openai-responses": _responses,
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


# -- the sample ----------------------------------------------------------------------------------
def scripted_sample(dialect: str, *, text: str | None = None, reasoning: str | None = None,
                    tool_calls: list | tuple | None = None, ending: str = "terminal",
                    at: str | None = None, speed: float = 1.0, stream: bool = True,
                    model: str = DEFAULT_MODEL, status: int = 500,
                    headers: dict[str, str] | None = None, path: str | None = None,
                    interval_ms: float = 10.0, include_usage: bool = False) -> dict:
    """A sample of a `dialect` stream (or, with `stream=False`, a whole JSON reply) holding
    `text`, `reasoning` and `tool_calls`, ending as `ending` says after the trigger `at` fired
    (default: after the last delta). `speed` scales the timing like `streamtap replay --speed`;
    `include_usage` adds OpenAI Chat's usage chunk (`stream_options.include_usage`)."""
    if dialect not in _STREAMS:
        raise ScriptError(f"unknown dialect {dialect!r}; expected one of {', '.join(DIALECTS)}")
    if ending not in SCRIPTED_ENDINGS:
        raise ScriptError(f"unknown ending {ending!r}; expected one of "
                          f"{', '.join(SCRIPTED_ENDINGS)}")
    if not speed > 0:
        raise ScriptError(f"speed must be more than 0, got {speed}")
    if ending == "terminal" and at is not None:
        raise ScriptError("`at` says where a stream breaks: give an ending too, such as "
                          "ending='reset'")
    calls = tool_calls_from(tool_calls)
    if text is None and not calls:
        text = DEFAULT_TEXT
    text, reasoning = text or "", reasoning or ""
    usage = (12, max(1, len(split_text(text)) + len(calls) * MIN_ARGUMENT_PIECES))
    path = path or PATHS[dialect].format(model=model)
    step = interval_ms / speed
    sample: dict = {
        "schema_version": SAMPLE_SCHEMA_VERSION, "source_trace_id": None, "provider": "scripted",
        "route": None, "model": model,
        "request": {"method": "POST", "path": path, "model": model, "stream": stream},
        "status": 200, "headers": dict(headers or {}), "decoded": True,
        "original_encoding": None, "error": None, "frames": [], "shapes": [],
        "body_shape": None, "stream": {"tool_calls": []}, "ending": ending,
        "injected": False, "notes": ["scripted"],
        "timing": {"response_headers_ms": 0.0, "end_ms": 0.0},
    }
    if ending in ("http_error", "no_response"):
        if not 400 <= status <= 599:
            raise ScriptError(f"status for an http_error must be 400..599, got {status}")
        sample.update(dialect=dialect, status=status if ending == "http_error" else None,
                      content_type="application/json")
        return sample
    if not stream:
        if ending != "terminal":
            raise ScriptError("a whole JSON reply (stream=False) ends `terminal`, "
                              "`http_error` or `no_response`")
        sample.update(dialect="json", content_type="application/json", body_shape=0,
                      shapes=[{"json": body(dialect, model, text, reasoning, calls, usage)}])
        sample["timing"]["first_byte_ms"] = step
        return sample
    content_type = _STREAM_TYPES.get(dialect, "text/event-stream")
    frames = _STREAMS[dialect](model, text, reasoning, calls, usage, include_usage)
    sample.update(dialect=dialect, content_type=content_type,
                  shapes=[shape for _, shape in frames],
                  frames=[[round((i + 1) * step, 3), None, kind, i]
                          for i, (kind, _) in enumerate(frames)])
    sample["timing"]["end_ms"] = round(len(frames) * step + step, 3)
    if ending != "terminal":
        _cut(sample, at, ending)
    return sample


def _cut(sample: dict, at: str | None, ending: str) -> None:
    """Keep the frames up to where `at` fires (the scanner fault injection uses), then end."""
    frames = sample["frames"]
    whole = rebuild(sample).frames
    if at is None:
        kept = max((i + 1 for i, entry in enumerate(frames) if entry[2].endswith("_delta")),
                   default=1)
    else:
        try:
            trigger = parse_trigger(at)
        except TriggerError as exc:
            raise ScriptError(f"at: {exc}") from None
        if trigger.before_body or trigger.kind in ("terminal", "ms", "bytes"):
            raise ScriptError(f"at={at!r}: a scripted stream breaks after a frame: use "
                              "first_progress, event:<kind>:<n> or events:<n>")
        request = sample["request"]
        scanner = FrameScanner(choose_dialect(sample["dialect"], request["path"],
                                              sample["content_type"]), trigger)
        kept = None
        for entry, data in zip(frames, whole):
            if scanner.feed(data, entry[0], entry[0]) is not None:
                kept = scanner.frames_before
                break
        if kept is None:
            counts = scanner.state.event_counts
            raise ScriptError(f"at={at!r} never fires in this stream: it has "
                              f"{dict(counts) or 'no events'}; ask for fewer, or give more "
                              "text or argument pieces")
    tail = frames[kept:]
    del frames[kept:]
    if ending == "truncated" and tail:
        # Half of the next frame, then a FIN: the rebuild writes an unfinished frame.
        frames.append([tail[0][0], max(len(whole[kept]) // 2, 1), "unterminated", None])
    sample["timing"]["end_ms"] = frames[-1][0] if frames else 0.0


# -- the default answer to a request ---------------------------------------------------------------
def first_tool(body: dict) -> tuple[str, dict] | None:
    """The first tool a request defines, as (name, JSON schema of its arguments), in any
    dialect's spelling: Chat/Ollama `function`, Responses flat, Anthropic `input_schema`,
    Gemini `functionDeclarations`."""
    tools = body.get("tools") if isinstance(body.get("tools"), list) else body.get("functions")
    for tool in tools if isinstance(tools, list) else ():
        if not isinstance(tool, dict):
            continue
        declarations = tool.get("functionDeclarations") or tool.get("function_declarations")
        for item in declarations if isinstance(declarations, list) else [tool]:
            inner = item.get("function") if isinstance(item.get("function"), dict) else item
            name = inner.get("name") if isinstance(inner, dict) else None
            if isinstance(name, str) and name:
                schema = inner.get("parameters") or inner.get("input_schema") or {}
                return name, schema if isinstance(schema, dict) else {}
    return None


_BY_TYPE = {"string": FILLER.strip(), "integer": 1, "number": 1.5, "boolean": True,
            "array": [], "object": {}, "null": None}


def arguments_for(schema: dict) -> dict:
    """Arguments that fit a tool's schema: each property (required ones first) with a value of
    its type (the first `enum` value when there is one)."""
    properties = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
    required = [name for name in schema.get("required") or [] if name in properties]
    out = {}
    for name in required + [name for name in properties if name not in required]:
        spec = properties[name] if isinstance(properties[name], dict) else {}
        if isinstance(spec.get("enum"), list) and spec["enum"]:
            out[name] = spec["enum"][0]
            continue
        kind = spec.get("type")
        kind = next((k for k in kind if k != "null"), "string") if isinstance(kind, list) else kind
        out[name] = copy_value(_BY_TYPE.get(kind, FILLER.strip()))
    return out


def copy_value(value: object) -> object:
    return list(value) if isinstance(value, list) else dict(value) if isinstance(value, dict) \
        else value


def default_answer(dialect: str, body: dict, stream: bool, model: str | None) -> dict:
    """What the fake provider answers a request it has no script for: a call of its first tool
    (arguments in at least 8 pieces) when it defines tools, else a text answer of at least 10
    deltas; both end normally."""
    tool = first_tool(body)
    calls = [{"name": tool[0], "arguments": arguments_for(tool[1])}] if tool else None
    options = body.get("stream_options") if isinstance(body.get("stream_options"), dict) else {}
    return scripted_sample(dialect, tool_calls=calls, stream=stream, model=model or DEFAULT_MODEL,
                           include_usage=options.get("include_usage") is True)
