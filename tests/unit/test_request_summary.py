"""The request summary: model, stream flag, counts, tool names and settings from each provider's
request body, and never a prompt, a tool description or an argument."""

from __future__ import annotations

import json

import pytest

from streamtap.diagnostics.record.request_summary import summarize_request

PROMPT = "CANARY-PROMPT-1c9e"
DESC = "CANARY-DESC-6a0f"
ARG = "CANARY-ARG-91c2"
SCHEMA = {"type": "object", "description": DESC,
          "properties": {"city": {"type": "string", "description": DESC, "enum": [DESC]}}}


def summarize(body: dict, path: str) -> dict:
    summary = summarize_request(json.dumps(body).encode(), path)
    assert "CANARY" not in json.dumps(summary)
    return summary


def test_openai_chat():
    body = {
        "model": "gpt-4o-mini",
        "stream": True,
        "stream_options": {"include_usage": True},
        "messages": [
            {"role": "system", "content": PROMPT},
            {"role": "user", "content": [{"type": "text", "text": PROMPT}]},
            {"role": "assistant", "content": None, "tool_calls": [{
                "id": "call_1", "type": "function",
                "function": {"name": "get_weather", "arguments": json.dumps({"city": ARG})}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": PROMPT},
        ],
        "tools": [
            {"type": "function", "function": {"name": "get_weather", "description": DESC,
                                              "parameters": SCHEMA}},
            {"type": "function", "function": {"name": "apply_patch", "description": DESC,
                                              "parameters": SCHEMA, "strict": True}},
        ],
        "tool_choice": "auto",
        "reasoning_effort": "high",
        "max_completion_tokens": 4096,
        "temperature": 0.2,
        "user": PROMPT,
        "metadata": {"note": PROMPT},
    }
    assert summarize(body, "/v1/chat/completions") == {
        "model": "gpt-4o-mini",
        "stream": True,
        "message_count": 4,
        "tool_count": 2,
        "tool_names": ["get_weather", "apply_patch"],
        "tool_choice": "auto",
        "reasoning": {"reasoning_effort": "high"},
        "max_tokens": 4096,
        "temperature": 0.2,
        "stream_options.include_usage": True,
    }


def test_openai_chat_tool_choice_object_and_legacy_max_tokens():
    summary = summarize({
        "model": "deepseek-reasoner", "stream": False, "messages": [],
        "tools": [{"type": "function", "function": {"name": "get_weather"}}],
        "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
        "max_tokens": 512, "stream_options": {"include_usage": False},
    }, "/chat/completions")
    assert summary["tool_choice"] == "function"
    assert summary["max_tokens"] == 512
    assert summary["stream"] is False and summary["message_count"] == 0
    assert summary["stream_options.include_usage"] is False


def test_openrouter_reasoning_object_on_chat():
    summary = summarize({"model": "deepseek/deepseek-r1", "messages": [],
                         "reasoning": {"effort": "low", "exclude": False}},
                        "/api/v1/chat/completions")
    assert summary["reasoning"] == {"reasoning.effort": "low"}


def test_openai_responses():
    body = {
        "model": "o4-mini",
        "stream": True,
        "instructions": PROMPT,
        "input": [
            {"role": "user", "content": [{"type": "input_text", "text": PROMPT}]},
            {"type": "function_call", "call_id": "call_1", "name": "get_weather",
             "arguments": json.dumps({"city": ARG})},
            {"type": "function_call_output", "call_id": "call_1", "output": PROMPT},
        ],
        "tools": [
            {"type": "function", "name": "get_weather", "description": DESC,
             "parameters": SCHEMA, "strict": True},
            {"type": "web_search"},
        ],
        "tool_choice": {"type": "function", "name": "get_weather"},
        "reasoning": {"effort": "medium", "summary": "auto"},
        "max_output_tokens": 2048,
        "temperature": 1,
    }
    assert summarize(body, "/v1/responses") == {
        "model": "o4-mini",
        "stream": True,
        "message_count": 3,
        "tool_count": 2,
        "tool_names": ["get_weather"],  # the built-in web_search has no name to record
        "tool_choice": "function",
        "reasoning": {"reasoning.effort": "medium"},
        "max_tokens": 2048,
        "temperature": 1,
    }


def test_openai_responses_string_input():
    summary = summarize({"model": "gpt-4.1", "input": PROMPT}, "/v1/responses")
    assert summary == {"model": "gpt-4.1", "message_count": 1}


def test_anthropic_messages():
    body = {
        "model": "claude-sonnet-4-20250514",
        "stream": True,
        "max_tokens": 16000,
        "system": [{"type": "text", "text": PROMPT, "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {"role": "user", "content": PROMPT},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": PROMPT, "signature": "sig"},
                {"type": "tool_use", "id": "toolu_1", "name": "get_weather",
                 "input": {"city": ARG, ARG: True}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": PROMPT}]},
        ],
        "tools": [
            {"name": "get_weather", "description": DESC, "input_schema": SCHEMA},
            {"type": "web_search_20250305", "name": "web_search", "max_uses": 5},
        ],
        "tool_choice": {"type": "any"},
        "thinking": {"type": "enabled", "budget_tokens": 10000},
        "temperature": 1.0,
        "metadata": {"user_id": PROMPT},
    }
    assert summarize(body, "/v1/messages") == {
        "model": "claude-sonnet-4-20250514",
        "stream": True,
        "message_count": 3,
        "tool_count": 2,
        "tool_names": ["get_weather", "web_search"],
        "tool_choice": "any",
        "reasoning": {"thinking.type": "enabled", "thinking.budget_tokens": 10000},
        "max_tokens": 16000,
        "temperature": 1.0,
    }


def test_gemini_model_comes_from_the_path():
    body = {
        "systemInstruction": {"parts": [{"text": PROMPT}]},
        "contents": [
            {"role": "user", "parts": [{"text": PROMPT}]},
            {"role": "model", "parts": [{"functionCall": {"name": "get_weather",
                                                          "args": {"city": ARG}}}]},
            {"role": "user", "parts": [{"functionResponse": {"name": "get_weather",
                                                              "response": {"r": PROMPT}}}]},
        ],
        "tools": [
            {"functionDeclarations": [
                {"name": "get_weather", "description": DESC, "parameters": SCHEMA},
                {"name": "get_time", "description": DESC},
            ]},
            {"googleSearch": {}},
        ],
        "generationConfig": {
            "temperature": 0.7,
            "maxOutputTokens": 8192,
            "thinkingConfig": {"thinkingBudget": 1024, "includeThoughts": True},
        },
    }
    summary = summarize(body, "/v1beta/models/gemini-2.5-flash:streamGenerateContent")
    assert summary == {
        "model": "gemini-2.5-flash",
        "message_count": 3,
        "tool_count": 3,  # two declarations and the search tool
        "tool_names": ["get_weather", "get_time"],
        "reasoning": {"thinkingConfig.thinkingBudget": 1024,
                      "thinkingConfig.includeThoughts": True},
        "max_tokens": 8192,
        "temperature": 0.7,
    }


def test_gemini_vertex_path_and_thinking_level():
    summary = summarize(
        {"contents": [], "generationConfig": {"thinkingConfig": {"thinkingLevel": "low"}}},
        "/v1/projects/my-project/locations/us-central1/publishers/google/models/"
        "gemini-3-pro-preview:streamGenerateContent")
    assert summary["model"] == "gemini-3-pro-preview"
    assert summary["reasoning"] == {"thinkingConfig.thinkingLevel": "low"}


def test_gemini_snake_case_declarations_are_counted():
    summary = summarize({"contents": [], "tools": [{"function_declarations": [
        {"name": "get_weather"}, {"name": "get_time"}]}]},
        "/v1beta/models/gemini-2.5-pro:generateContent")
    assert summary["tool_names"] == ["get_weather", "get_time"]
    assert summary["tool_count"] == 2


def test_ollama_chat():
    body = {
        "model": "qwen3:8b",
        "messages": [{"role": "user", "content": PROMPT, "images": [PROMPT]},
                     {"role": "assistant", "content": "", "tool_calls": [
                         {"function": {"name": "get_weather", "arguments": {ARG: ARG}}}]}],
        "tools": [{"type": "function", "function": {"name": "get_weather", "description": DESC,
                                                    "parameters": SCHEMA}}],
        "think": True,
        "stream": True,
        "options": {"temperature": 0.6, "num_predict": 256, "num_ctx": 8192},
        "keep_alive": "5m",
    }
    assert summarize(body, "/api/chat") == {
        "model": "qwen3:8b",
        "stream": True,
        "message_count": 2,
        "tool_count": 1,
        "tool_names": ["get_weather"],
        "reasoning": {"think": True},
        "max_tokens": 256,
        "temperature": 0.6,
    }


def test_ollama_think_level_and_generate():
    summary = summarize({"model": "gpt-oss:20b", "prompt": PROMPT, "think": "high",
                         "stream": False}, "/api/generate")
    assert summary == {"model": "gpt-oss:20b", "stream": False, "reasoning": {"think": "high"}}


# -- what never gets through --------------------------------------------------------------------------


def test_free_form_strings_in_token_slots_are_replaced():
    summary = summarize({"model": f"my model {PROMPT}", "tool_choice": PROMPT + " please",
                         "reasoning_effort": {"x": PROMPT},
                         "tools": [{"type": "function", "function": {"name": f"a b {PROMPT}"}}]},
                        "/v1/chat/completions")
    assert summary["model"] == "<non-token>"
    assert summary["tool_choice"] == "<non-token>"
    assert summary["tool_names"] == []  # a name that is not an identifier is not recorded
    assert summary["tool_count"] == 1
    assert summary["reasoning"] == {"reasoning_effort": "<non-token>"}


def test_numbers_are_numbers_only():
    summary = summarize({"model": "m", "max_tokens": "100", "temperature": True,
                         "stream": "yes", "stream_options": {"include_usage": "true"},
                         "thinking": {"budget_tokens": "lots"}}, "/v1/messages")
    assert summary == {"model": "m"}


def test_tool_names_are_capped_and_unique():
    tools = [{"name": f"tool_{i % 100}"} for i in range(300)]
    summary = summarize({"tools": tools}, "/v1/messages")
    assert summary["tool_count"] == 300
    assert summary["tool_names"] == [f"tool_{i}" for i in range(64)]


@pytest.mark.parametrize("body", [b"", b"not json", b"[1, 2]", b'{"model": ', b"\xff\xfe",
                                  b"null", b'"string"'])
def test_unparseable_or_non_object_bodies(body):
    assert summarize_request(body, "/v1/chat/completions") == {}
    assert summarize_request(body, "/v1beta/models/gemini-2.0-flash:generateContent") == {
        "model": "gemini-2.0-flash"}


def test_every_canary_stays_out_of_every_summary():
    bodies = [
        ({"model": "m", "messages": [{"role": "user", "content": PROMPT}],
          "tools": [{"type": "function", "function": {"name": "t", "description": DESC,
                                                      "parameters": SCHEMA}}],
          "response_format": {"type": "json_schema", "json_schema": {"name": "out",
                                                                      "schema": SCHEMA}},
          "prediction": {"type": "content", "content": PROMPT},
          "stop": [PROMPT], "logit_bias": {PROMPT: 1}}, "/v1/chat/completions"),
        ({"model": "m", "input": PROMPT, "instructions": PROMPT,
          "text": {"format": {"type": "json_schema", "schema": SCHEMA}}}, "/v1/responses"),
        ({"model": "m", "system": PROMPT, "messages": [], "stop_sequences": [PROMPT]},
         "/v1/messages"),
        ({"contents": [], "generationConfig": {"responseSchema": SCHEMA,
                                               "stopSequences": [PROMPT]},
          "cachedContent": PROMPT}, "/v1beta/models/g:generateContent"),
        ({"model": "m", "prompt": PROMPT, "system": PROMPT, "template": PROMPT,
          "format": SCHEMA, "context": [1, 2]}, "/api/generate"),
    ]
    for body, path in bodies:
        summarize(body, path)  # asserts no canary


def test_gemini_tool_config_mode_is_the_tool_choice():
    summary = summarize({"contents": [], "toolConfig": {"functionCallingConfig": {
        "mode": "ANY", "allowedFunctionNames": ["get_weather"]}}},
        "/v1beta/models/gemini-2.5-flash:generateContent")
    assert summary["tool_choice"] == "ANY"


def test_a_partial_body_gives_model_and_stream_and_says_it_was_cut_short():
    from streamtap.diagnostics.record.request_summary import keys_from_tail, summarize_partial_body

    head = b'{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"abc'
    assert summarize_partial_body(head, "/v1/chat/completions") == {
        "summary_truncated": True, "model": "gpt-4o", "stream": True}
    # Message text can hold the words, but always escaped: never taken for a key.
    text = b'{"messages":[{"content":"say \\"model\\": \\"secret-word\\" and \\"stream\\": true'
    assert summarize_partial_body(text, "/v1/messages") == {"summary_truncated": True}
    assert keys_from_tail(b'x\\"}]}],"model":"claude-x","stream":false}') == {
        "model": "claude-x", "stream": False}
    assert summarize_partial_body(b"not json", "/v1/chat/completions") == {
        "summary_truncated": True}
