"""The secret scrubber: finds credentials in a string that reached a record or a log line, and
keeps the long identifiers a user needs (paths, sample names, request ids, model names).

Two passes. First the known key formats, each a named pattern (tests pin every one). Then a
generic rule for tokens no prefix announces: a run of token characters is split at `/` into
segments and at `-_.` into pieces, and a segment is a key only when one of its pieces is long and
looks random (letters and digits interleaved, or mixed case that is not CamelCase). Words, dates,
versions, UUIDs and ids that start with a provider's id prefix (`req_`, `chatcmpl-`) are kept.
"""

from __future__ import annotations

import re

REDACTED = "[REDACTED]"

# Characters a key may be made of; `*` because providers echo keys masked (`sk-****wuv6`, and
# `sk-abc...wxyz` with dots inside, never at the end: that is the sentence's full stop).
_KEYCHARS = r"[A-Za-z0-9_\-*]"
_NOT_AFTER = r"(?<![A-Za-z0-9])"  # a key starts at a word edge: `task-...` holds no `sk-` key

KEY_PATTERNS: dict[str, str] = {
    # OpenAI (sk-, sk-proj-, sk-svcacct-), Anthropic (sk-ant-api03-), DeepSeek: also masked
    "sk_key": _NOT_AFTER + r"sk-(?:" + _KEYCHARS + r"|[.…]+(?=" + _KEYCHARS + r")){6,}",
    # a credential with its scheme; a lowercase word after it is prose ("basic usage")
    "auth_scheme": (r"\b(?:[Bb]earer|[Bb]asic|BEARER|BASIC)\s+"
                    r"(?![a-z]+(?![A-Za-z0-9._~+/=\-*]))[A-Za-z0-9._~+/=\-*]{8,}"),
    "jwt": r"eyJ[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]{4,}(?:\.[A-Za-z0-9_\-]*)?",
    "google_key": r"AIza[A-Za-z0-9_\-]{20,}",
    "aws_key_id": _NOT_AFTER + r"(?:AKIA|ASIA)[0-9A-Z]{16}(?![A-Za-z0-9])",
    "github_token": _NOT_AFTER + r"(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})",
    # Fireworks fw_, Hugging Face hf_, Groq gsk_, Replicate r8_, xAI xai-, Perplexity pplx-,
    # NVIDIA nvapi-, GitLab glpat-. The body opens with 12 letters or digits that are not one
    # lowercase word, so a model or resource name (`xai-grok-2-vision`, `hf_inference_x`) stays.
    "provider_prefix": (_NOT_AFTER + r"(?:fw|hf|gsk|r8|xai|pplx|nvapi|glpat)[_-]"
                        r"(?![a-z]+(?![A-Za-z0-9]))[A-Za-z0-9]{12}[A-Za-z0-9_\-]*"),
    "openai_org_project": _NOT_AFTER + r"(?:org|proj)[-_][A-Za-z0-9]{16,}",
    # a short key right after a word that names one: "api key: abcd1234efgh", "token=…".
    # It must hold a letter and a digit or `*`, so "max_tokens: 4096" and "token limit" stay.
    "named_key": (r"(?P<name>(?<![A-Za-z])"
                  r"(?i:api[_-]?key|key|token|secret|password|passwd|credential)s?[\"']?"
                  r"(?:\s*[:=]\s*|\s+(?i:provided|given|ending in|ending with|is|was)?:?\s*)"
                  r"[\"'`]?)(?=[A-Za-z0-9*_\-+/]*[A-Za-z])(?=[A-Za-z0-9*_\-+/]*[0-9*])"
                  r"[A-Za-z0-9*_\-+/]{8,}"),
}


def compile_patterns(patterns: dict[str, str]) -> re.Pattern:
    """One regex for all patterns. Every key format starts at a word edge with one of a few
    letters: checking that first makes a position inside a word cost one test, not nine."""
    first_letters = "sSBbeAaghfrxpPnokKtTcC"
    return re.compile(f"(?<![A-Za-z0-9])(?=[{first_letters}])(?:"
                      + "|".join(f"(?:{pattern})" for pattern in patterns.values()) + ")")


_KNOWN = compile_patterns(KEY_PATTERNS)

GENERIC_MIN = 24  # shorter random pieces are too common in ids to call them keys
_RUN = re.compile(r"(?<![A-Za-z0-9+/_\-.])[A-Za-z0-9+/_\-.]{%d,}={0,2}" % GENERIC_MIN)
_PIECES = re.compile(r"[_\-.]+")
# Ids providers generate, kept whole: they are what a user quotes to the provider's support.
ID_PREFIXES = frozenset({
    "req", "request", "msg", "chatcmpl", "cmpl", "resp", "rs", "fc", "ws", "ci", "toolu",
    "srvtoolu", "call", "gen", "run", "file", "batch", "asst", "thread", "evt", "step", "ftjob",
    "modr", "item", "trace", "span",
})
_CAMEL = re.compile(r"(?:[A-Z]{0,3}[a-z]{2,})+[A-Z]{0,3}")
_CLASS_CHANGE = re.compile(r"(?<=[A-Za-z])(?=[0-9])|(?<=[0-9])(?=[A-Za-z])")


def random_piece(piece: str) -> bool:
    """A piece (no separators) long enough and mixed enough to be a key, not a word or a number."""
    piece = piece.rstrip("=")
    if len(piece) < GENERIC_MIN:
        return False
    letters = sum(ch.isalpha() for ch in piece)
    if letters == len(piece):  # letters only: random mixed case, not CamelCase words
        return not piece.islower() and not piece.isupper() and not _CAMEL.fullmatch(piece)
    if letters == 0:
        return False  # a long number (a timestamp, an account number) is not a credential
    # letters and digits (and base64's + /): random when the two alternate often (hex, base64),
    # not a word followed by a number ("release20241118..."), or when its letters are mixed case
    # that is not CamelCase (an AWS secret is mostly letters)
    if len(_CLASS_CHANGE.findall(piece)) >= 4:
        return True
    letters_only = "".join(ch for ch in piece if ch.isalpha())
    return (not letters_only.islower() and not letters_only.isupper()
            and not _CAMEL.fullmatch(letters_only))


def segment_is_key(segment: str) -> bool:
    """One `/`-free segment: a key when a piece of it is random and no id prefix claims it."""
    if len(segment) < GENERIC_MIN:
        return False  # no piece can be long enough
    pieces = [piece for piece in _PIECES.split(segment) if piece]
    if not pieces or pieces[0].lower() in ID_PREFIXES:
        return False
    return any(random_piece(piece) for piece in pieces)


def _generic(match: re.Match) -> str:
    run = match.group(0)
    if "/" not in run:
        return REDACTED if segment_is_key(run) else run
    segments = run.split("/")
    keys = [segment_is_key(segment) for segment in segments]
    if any(keys):
        return "/".join(REDACTED if key else segment for key, segment in zip(keys, segments))
    # base64 uses `/` too: a run none of whose segments is a word is judged whole
    if not any(_wordy(segment) for segment in segments) and random_piece(run.replace("/", "")):
        return REDACTED
    return run


def _wordy(segment: str) -> bool:
    letters = _PIECES.sub("", segment)
    return letters.isalpha() and (letters.islower() or bool(_CAMEL.fullmatch(letters)))


def _known(match: re.Match) -> str:
    name = match.groupdict().get("name")  # "api key provided: " stays, so the message reads
    return name + REDACTED if name else REDACTED


def scrub(text: str, known: re.Pattern = _KNOWN) -> str:
    """Replace anything that looks like a credential. Cheap when there is nothing to replace.
    (`known` is for tests that take one pattern out to prove another test needs it.)"""
    return _RUN.sub(_generic, known.sub(_known, text))


def looks_like_key(text: str) -> bool:
    return scrub(text) != text
