"""A client team's own code: ask the model for a tool call over a stream, and retry when the
stream breaks before it finished (a reset, or a clean close with no finish_reason)."""

import json

import openai

TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}]


class StreamIncomplete(Exception):
    """The stream ended without a finish_reason: the answer is not whole."""


def ask_for_tool_call(client: openai.OpenAI, attempts: int = 3) -> tuple[dict, list[str]]:
    """The tool call's name and parsed arguments, and what went wrong on each failed attempt."""
    failures: list[str] = []
    for _ in range(attempts):
        try:
            return _one_attempt(client), failures
        except (openai.APIConnectionError, StreamIncomplete) as exc:
            failures.append(type(exc).__name__)
    raise RuntimeError(f"gave up after {attempts} attempts: {failures}")


def _one_attempt(client: openai.OpenAI) -> dict:
    name, arguments, finish = None, "", None
    stream = client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "weather in Paris?"}],
        tools=TOOLS, stream=True)
    for chunk in stream:
        for choice in chunk.choices:
            for call in choice.delta.tool_calls or []:
                name = call.function.name or name
                arguments += call.function.arguments or ""
            finish = choice.finish_reason or finish
    if finish is None:
        raise StreamIncomplete("no finish_reason")
    return {"name": name, "arguments": json.loads(arguments)}


def ask_once_without_retry(client: openai.OpenAI) -> dict:
    """A naive client: one attempt, and a stream that closes early passes for a whole one."""
    name, arguments = None, ""
    stream = client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "weather in Paris?"}],
        tools=TOOLS, stream=True)
    for chunk in stream:
        for choice in chunk.choices:
            for call in choice.delta.tool_calls or []:
                name = call.function.name or name
                arguments += call.function.arguments or ""
    return {"name": name, "arguments": arguments}
