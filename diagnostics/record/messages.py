"""A provider's error message, cut down to what can be recorded: one short sentence with quoted
spans and key-like strings removed.

Provider messages echo input: a 401 quotes the key, in part (`sk-proj-****wuv6`, `****wuv6`),
and a 400 quotes the offending part of the request (the prompt, a tool argument). The `type` and
`code` carry the verdict; the message is kept only as a hint a user can read.
"""

from __future__ import annotations

import re

from streamtap.diagnostics.record.secrets import REDACTED, scrub

MAX_MESSAGE = 120  # "a short sentence"
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
    text = _CONTROL.sub(" ", text[:4096])
    text = _QUOTED.sub(QUOTED, text)
    text = _MASKED.sub(REDACTED, text)
    text = _NAMED_KEY_ANY_LENGTH.sub(lambda match: match.group("name") + REDACTED, text)
    text = scrub(text).strip()
    text = _SENTENCE_END.split(text, 1)[0]
    if len(text) > MAX_MESSAGE:
        cut = text[:MAX_MESSAGE].rsplit(" ", 1)[0]
        text = cut + " …"
    return text or None
