"""A provider's error message, cut down to what can be recorded: the request's credentials and any
run the provider echoed from the request removed by value (redaction/echoes.py), then one short
sentence with quoted spans and key-like strings removed (the pattern layer, below).

Provider messages echo input: a 401 quotes the key, in part (`sk-proj-****wuv6`, `****wuv6`),
and a 400 quotes the offending part of the request (the prompt, a tool argument). The `type` and
`code` carry the verdict; the message is kept only as a hint a user can read.
"""

from __future__ import annotations

import re

from streamtap.diagnostics.redaction.echoes import MESSAGE_DROPPED, RequestEchoes
from streamtap.diagnostics.redaction.secrets import REDACTED, scrub

MAX_MESSAGE = 120  # "a short sentence"
MAX_MESSAGE_INPUT = 4096  # of a provider's message, the part read at all
QUOTED = "[quoted]"

# Quoted spans: double quotes, backticks, typographic quotes, and single quotes that open at a
# word's start (so "doesn't ... isn't" is not one span).
_QUOTED = re.compile(r"\"[^\"\n]*\"|`[^`\n]*`|“[^”\n]*”|‘[^’\n]*’"
                     r"|(?<![A-Za-z0-9])'[^'\n]*'(?![A-Za-z0-9])")
# Any key-like string right after a word that names a key, whatever its length: providers echo
# the last four characters of a key (`key ending in wuv6`).
_NAMED_KEY_ANY_LENGTH = re.compile(
    r"(?P<name>(?<![A-Za-z])(?i:api[_-]?key|key|token|secret|password|credential)s?"
    r"(?:\s*[:=]\s*|\s+(?i:provided|given|ending in|ending with|starting with|is|was)?:?\s*))"
    r"(?=[A-Za-z0-9*_\-+/]*[A-Za-z*])(?=[A-Za-z0-9*_\-+/]*[0-9*])[A-Za-z0-9*_\-+/]{4,}")
_MASKED = re.compile(r"[A-Za-z0-9_\-]*\*{3,}[A-Za-z0-9_\-*]*")  # `****wuv6`, `sk-…****…L0mn`
_SENTENCE_END = re.compile(r"(?<=[.!?])\s")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]+")


def provider_message(text: object) -> str | None:
    """The recordable part of a provider's error message, or None when nothing is left."""
    if not isinstance(text, str) or not text.strip():
        return None
    text = _CONTROL.sub(" ", text[:MAX_MESSAGE_INPUT])
    text = _QUOTED.sub(QUOTED, text)
    text = _MASKED.sub(REDACTED, text)
    text = _NAMED_KEY_ANY_LENGTH.sub(lambda match: match.group("name") + REDACTED, text)
    text = scrub(text).strip()
    text = _SENTENCE_END.split(text, 1)[0]
    if len(text) > MAX_MESSAGE:
        cut = text[:MAX_MESSAGE].rsplit(" ", 1)[0]
        text = cut + " …"
    return text or None


def settle_messages(slots: list[tuple[dict, str, object]], echoes: RequestEchoes) -> None:
    """Write each provider message into its slot (`entry[key]`), both layers applied: the by-value
    one first, so the pattern layer's cuts cannot leave an echo's head behind. When the request
    was too large to check, a message is not kept at all and the entry says why."""
    if not slots:
        return
    texts = [raw[:MAX_MESSAGE_INPUT] if isinstance(raw, str) else None for _, _, raw in slots]
    if not any(text and text.strip() for text in texts):
        for entry, key, _ in slots:
            entry[key] = None
        return
    if echoes.too_large:
        for (entry, key, _), text in zip(slots, texts):
            entry[key] = None
            if provider_message(text) is not None:
                entry["message_dropped"] = MESSAGE_DROPPED  # a fixed code, not request text
        return
    for (entry, key, _), text in zip(slots, echoes.clean_all(texts)):
        entry[key] = provider_message(text)
