"""A content-free summary of an LLM request body: flags, counts and settings, never a message,
a tool description or an argument."""

from __future__ import annotations

import json
import re

from streamtap.diagnostics.dialects.usage import dig as _get
from streamtap.diagnostics.dialects.stream import token

_GEMINI_MODEL = re.compile(r"/models/([^/:?]+)")
MAX_TOOL_NAMES = 64


def _number(value: object) -> int | float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    return None


def _tool_names(tools: list) -> list[str]:
    """Names the request defined (developer-chosen identifiers such as `apply_patch`)."""
    names: list[str] = []
    for tool in tools:
        if not isinstance(tool, dict):
            continue
        declarations = tool.get("functionDeclarations") or tool.get("function_declarations")
        candidates = declarations if isinstance(declarations, list) else [tool]
        for item in candidates:
            if not isinstance(item, dict):
                continue
            name = _get(item, "function", "name") or item.get("name")
            name = token(name)
            if name and name != "<non-token>" and name not in names:
                names.append(name)
    return names[:MAX_TOOL_NAMES]


def _count_tools(tools: list) -> int:
    count = 0
    for tool in tools:
        declarations = (tool.get("functionDeclarations") or tool.get("function_declarations")
                        if isinstance(tool, dict) else None)
        count += len(declarations) if isinstance(declarations, list) else 1
    return count


def summarize_request(body: bytes, path: str) -> dict:
    """Summary fields for `request`. Unparseable or non-object bodies give only what the path says."""
    summary: dict = {}
    path_model = _GEMINI_MODEL.search(path)
    if path_model:
        summary["model"] = token(path_model.group(1))
    if not body or body.lstrip()[:1] != b"{":
        return summary
    try:
        obj = json.loads(body)
    except ValueError:
        return summary
    if not isinstance(obj, dict):
        return summary
    if "model" in obj:
        summary["model"] = token(obj.get("model"))
    if isinstance(obj.get("stream"), bool):
        summary["stream"] = obj["stream"]
    messages = obj.get("messages")
    if not isinstance(messages, list):
        messages = obj.get("contents") if isinstance(obj.get("contents"), list) else obj.get("input")
    if isinstance(messages, list):
        summary["message_count"] = len(messages)
    elif isinstance(messages, str):
        summary["message_count"] = 1
    tools = obj.get("tools")
    if isinstance(tools, list):
        summary["tool_count"] = _count_tools(tools)
        summary["tool_names"] = _tool_names(tools)
    choice = obj.get("tool_choice")
    if choice is None:  # Gemini
        choice = _get(obj, "toolConfig", "functionCallingConfig", "mode")
    if choice is not None:
        summary["tool_choice"] = token(choice if isinstance(choice, str) else _get(choice, "type"))
    reasoning = {
        "reasoning_effort": token(obj.get("reasoning_effort")),
        "reasoning.effort": token(_get(obj, "reasoning", "effort")),
        "thinking.type": token(_get(obj, "thinking", "type")),
        "thinking.budget_tokens": _number(_get(obj, "thinking", "budget_tokens")),
        "thinkingConfig.thinkingBudget": _number(
            _get(obj, "generationConfig", "thinkingConfig", "thinkingBudget")),
        "thinkingConfig.thinkingLevel": token(
            _get(obj, "generationConfig", "thinkingConfig", "thinkingLevel")),
        "thinkingConfig.includeThoughts": _get(
            obj, "generationConfig", "thinkingConfig", "includeThoughts")
        if isinstance(_get(obj, "generationConfig", "thinkingConfig", "includeThoughts"), bool)
        else None,
        "think": obj["think"] if isinstance(obj.get("think"), bool) else token(obj.get("think")),
    }
    reasoning = {key: value for key, value in reasoning.items() if value is not None}
    if reasoning:
        summary["reasoning"] = reasoning
    for spelling in (("max_tokens",), ("max_completion_tokens",), ("max_output_tokens",),
                     ("generationConfig", "maxOutputTokens"), ("options", "num_predict")):
        value = _number(_get(obj, *spelling))
        if value is not None:
            summary["max_tokens"] = value
            break
    for spelling in (("temperature",), ("generationConfig", "temperature"),
                     ("options", "temperature")):
        value = _number(_get(obj, *spelling))
        if value is not None:
            summary["temperature"] = value
            break
    include_usage = _get(obj, "stream_options", "include_usage")
    if isinstance(include_usage, bool):
        summary["stream_options.include_usage"] = include_usage
    return summary


# A key in JSON text: a quote right before `model` and after it. Inside a JSON string a quote is
# escaped (`\"model\"`), so message text can never match, only a real key does.
_MODEL_KEY = re.compile(rb'"model"\s*:\s*"([^"\\]{1,200})"')
_STREAM_KEY = re.compile(rb'"stream"\s*:\s*(true|false)\b')


def summarize_partial_body(head: bytes, path: str) -> dict:
    """What can be said of a JSON body too large to parse whole, from its first bytes: the model
    and the stream flag, never counts, which need the whole body (`summary_truncated` says so in
    the record). `keys_from_tail` adds what the body's last bytes say."""
    summary: dict = {"summary_truncated": True}
    path_model = _GEMINI_MODEL.search(path)
    if path_model:
        summary["model"] = token(path_model.group(1))
    if head.lstrip()[:1] == b"{":
        summary.update({key: value for key, value in keys_from_tail(head).items()
                        if key not in summary})
    return summary


def keys_from_tail(text: bytes) -> dict:
    """`model` and `stream` where they appear as keys in a piece of JSON text (SDKs write them
    first or last, around the messages)."""
    found: dict = {}
    model = _MODEL_KEY.search(text)
    if model:
        found["model"] = token(model.group(1).decode("utf-8", "replace"))
    stream = _STREAM_KEY.search(text)
    if stream:
        found["stream"] = stream.group(1) == b"true"
    return found
