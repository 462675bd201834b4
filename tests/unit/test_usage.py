"""diagnostics/dialects/usage.py: every provider's token-usage spelling mapped to the record's
names (input, output, reasoning, cache_read, cache_write); absent or non-integer counts left out."""

from __future__ import annotations

import pytest

from streamtap.diagnostics.dialects.usage import dig, normalize_usage


def test_dig():
    assert dig({"a": {"b": 3}}, "a", "b") == 3
    assert dig({"a": {"b": 3}}, "a", "c") is None
    assert dig({"a": 5}, "a", "b") is None
    assert dig("x", "a") is None
    assert dig({"a": 1}) == {"a": 1}


@pytest.mark.parametrize("usage, expected", [
    # Gemini usageMetadata
    ({"promptTokenCount": 10, "candidatesTokenCount": 4, "thoughtsTokenCount": 2,
      "cachedContentTokenCount": 3, "totalTokenCount": 19},
     {"input": 10, "output": 4, "reasoning": 2, "cache_read": 3}),
    ({"candidatesTokenCount": 4}, {"output": 4}),
    ({"promptTokenCount": 10}, {"input": 10}),
    # OpenAI chat and compatibles
    ({"prompt_tokens": 9, "completion_tokens": 4,
      "completion_tokens_details": {"reasoning_tokens": 1},
      "prompt_tokens_details": {"cached_tokens": 2}},
     {"input": 9, "output": 4, "reasoning": 1, "cache_read": 2}),
    ({"completion_tokens": 4}, {"output": 4}),
    ({"prompt_tokens": 9}, {"input": 9}),
    # DeepSeek's cache hits, used only when the OpenAI field is absent
    ({"prompt_tokens": 9, "prompt_cache_hit_tokens": 6}, {"input": 9, "cache_read": 6}),
    ({"prompt_tokens": 9, "prompt_tokens_details": {"cached_tokens": 0},
      "prompt_cache_hit_tokens": 6}, {"input": 9, "cache_read": 0}),
    # Ollama native
    ({"prompt_eval_count": 12, "eval_count": 5, "total_duration": 99},
     {"input": 12, "output": 5}),
    ({"eval_count": 5}, {"output": 5}),
    ({"prompt_eval_count": 12}, {"input": 12}),
    # OpenAI Responses
    ({"input_tokens": 30, "input_tokens_details": {"cached_tokens": 5}, "output_tokens": 8,
      "output_tokens_details": {"reasoning_tokens": 2}},
     {"input": 30, "output": 8, "reasoning": 2, "cache_read": 5}),
    # Anthropic Messages
    ({"input_tokens": 20, "cache_creation_input_tokens": 3, "cache_read_input_tokens": 4,
      "output_tokens": 1}, {"input": 20, "output": 1, "cache_read": 4, "cache_write": 3}),
    ({"input_tokens": 20, "input_tokens_details": {"cached_tokens": 0},
      "cache_read_input_tokens": 4}, {"input": 20, "cache_read": 0}),
    # what is not a count is left out
    ({"input_tokens": True, "output_tokens": "5", "cache_read_input_tokens": 1.0}, {}),
    ({"total_tokens": 5}, {}),
    ({}, {}),
])
def test_normalize_usage(usage, expected):
    assert normalize_usage(usage) == expected


@pytest.mark.parametrize("usage", [None, [1], "x", 5])
def test_not_an_object_is_no_usage(usage):
    assert normalize_usage(usage) == {}
