"""Token usage in every provider's spelling, mapped to one: input, output, reasoning, cache_read,
cache_write. Shared by the streaming dialects and the JSON-body dialect."""

from __future__ import annotations


def dig(obj: object, *path: str) -> object:
    """`obj[path[0]][path[1]]...`, or None where a step is missing or not an object."""
    for key in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def normalize_usage(usage: object) -> dict[str, object]:
    """Map one usage object (any provider's) to the record's names; absent counts are left out."""
    if not isinstance(usage, dict):
        return {}
    if "promptTokenCount" in usage or "candidatesTokenCount" in usage:  # Gemini usageMetadata
        found = {
            "input": usage.get("promptTokenCount"),
            "output": usage.get("candidatesTokenCount"),
            "reasoning": usage.get("thoughtsTokenCount"),
            "cache_read": usage.get("cachedContentTokenCount"),
        }
    elif "prompt_tokens" in usage or "completion_tokens" in usage:  # OpenAI chat and compatibles
        found = {
            "input": usage.get("prompt_tokens"),
            "output": usage.get("completion_tokens"),
            "reasoning": dig(usage, "completion_tokens_details", "reasoning_tokens"),
            "cache_read": dig(usage, "prompt_tokens_details", "cached_tokens")
            if dig(usage, "prompt_tokens_details", "cached_tokens") is not None
            else usage.get("prompt_cache_hit_tokens"),
        }
    elif "prompt_eval_count" in usage or "eval_count" in usage:  # Ollama native
        found = {"input": usage.get("prompt_eval_count"), "output": usage.get("eval_count")}
    else:  # OpenAI Responses and Anthropic Messages
        found = {
            "input": usage.get("input_tokens"),
            "output": usage.get("output_tokens"),
            "reasoning": dig(usage, "output_tokens_details", "reasoning_tokens"),
            "cache_read": dig(usage, "input_tokens_details", "cached_tokens")
            if dig(usage, "input_tokens_details", "cached_tokens") is not None
            else usage.get("cache_read_input_tokens"),
            "cache_write": usage.get("cache_creation_input_tokens"),
        }
    return {name: value for name, value in found.items()
            if isinstance(value, int) and not isinstance(value, bool)}
