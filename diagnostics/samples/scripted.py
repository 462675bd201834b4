"""Scripted streams: a sample written from a description (text, reasoning, tool calls, an ending
and where it happens) instead of recorded, so the fake provider can play it with the same rebuild
and endings that replay uses. Pure: it returns a sample dict.

Frame shapes hold the literal content (the rebuild keeps literal strings and fills only markers),
built per dialect by scripted_dialects.py; frames carry no size (nothing to pad to), and the
place an ending happens is found by the trigger scanner fault injection uses, reading the rebuilt
bytes with the dialect (so `at="event:tool_input_delta:5"` means here what it means in a fault
rule).
"""

from __future__ import annotations

import json

from streamtap.diagnostics.faults.triggers import FrameScanner, TriggerError, parse_trigger
from streamtap.diagnostics.dialects import choose_dialect
from streamtap.diagnostics.errors import UserError
from streamtap.diagnostics.samples.rebuild import FILLER, rebuild
from streamtap.diagnostics.samples.format import SAMPLE_ENDINGS, SAMPLE_SCHEMA_VERSION
from streamtap.diagnostics.samples.scripted_dialects import (MIN_ARGUMENT_PIECES, STREAMS,
                                                             ToolCall, body, split_text)

DIALECTS = ("openai-chat", "openai-responses", "anthropic-messages", "gemini", "ollama-ndjson")
PATHS = {"openai-chat": "/v1/chat/completions", "openai-responses": "/v1/responses",
         "anthropic-messages": "/v1/messages",
         "gemini": "/v1beta/models/{model}:streamGenerateContent",
         "ollama-ndjson": "/api/chat"}
SCRIPTED_ENDINGS = tuple(ending for ending in SAMPLE_ENDINGS if ending != "client_gone")
DEFAULT_TEXT = (FILLER * 3).strip()  # 15 words: a text answer of at least 10 deltas
DEFAULT_MODEL = "streamtap-fake"
_STREAM_TYPES = {"ollama-ndjson": "application/x-ndjson"}


class ScriptError(UserError, ValueError):
    """A script that cannot become a stream; says what to change."""


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
    if dialect not in STREAMS:
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
    frames = STREAMS[dialect](model, text, reasoning, calls, usage, include_usage)
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


# The tool called when a text-only request is answered with a tool call anyway (`answer`).
STAND_IN_TOOL = ("get_weather", {"type": "object", "properties": {"city": {"type": "string"}},
                                 "required": ["city"]})


def default_answer(dialect: str, body: dict, stream: bool, model: str | None,
                   answer: str | None = None) -> dict:
    """What the fake provider answers a request it has no script for: a call of its first tool
    (arguments in at least 8 pieces) when it defines tools, else a text answer of at least 10
    deltas; both end normally. `answer` overrides the request: `text`, or `tool_call` (of
    STAND_IN_TOOL when the request defines none)."""
    tool = first_tool(body)
    if answer == "text":
        tool = None
    elif answer == "tool_call":
        tool = tool or STAND_IN_TOOL
    calls = [{"name": tool[0], "arguments": arguments_for(tool[1])}] if tool else None
    options = body.get("stream_options") if isinstance(body.get("stream_options"), dict) else {}
    return scripted_sample(dialect, tool_calls=calls, stream=stream, model=model or DEFAULT_MODEL,
                           include_usage=options.get("include_usage") is True)
