"""What a provider quotes back from the request, removed by value: streamtap holds the request it
forwarded, so it need not guess which words of an error message are the user's.

Two rules, both exact. Every value of a credential header (and of a `?key=`-style query value) is
removed from every string of the record. Every run of `MIN_RUN` or more characters of a string
recorded from upstream bytes (a provider's error message) that also occurs in a string of the
request body, or in a credential, becomes `[echo]`. The pattern scrubber (secrets.py, messages.py)
runs after this, as the second line.

Bounded and cheap: nothing is built per request. The body is read only when there is a message to
check, at the end of the exchange, and only up to `TEXT_BUDGET` of its string text; a larger body
is not checked, and the message is dropped (`MESSAGE_DROPPED`). The request side is never hashed
into a table: its 8-byte shingles are streamed past the few shingles of the messages (a C-level
set intersection, about 40 ms per MiB of request text), so memory is the messages' size.
"""

from __future__ import annotations

import base64
import json
import re
import sys
from array import array
from collections.abc import Iterable
from urllib.parse import unquote_plus

from streamtap.diagnostics.redaction.secrets import REDACTED

ECHO = "[echo]"
MIN_RUN = 8  # shorter runs are ordinary words a message and a prompt may share by chance
TEXT_BUDGET = 1024 * 1024  # bytes of the body's string text checked, at most
MESSAGE_DROPPED = "request_too_large_to_check"  # a fixed code, never request text
# A credential shorter than this is a placeholder (`EMPTY`, `ollama`, `dummy` are what local
# servers document), not a secret; removing it from every string would eat route and model names.
MIN_CREDENTIAL = 8
CREDENTIAL_HEADERS = frozenset({"authorization", "x-api-key", "api-key", "x-goog-api-key",
                                "proxy-authorization", "cookie"})
AUTH_SCHEMES = ("bearer", "basic")
# Query parameters that carry a key (Gemini `?key=`, Azure `?api-key=`, signed URLs).
CREDENTIAL_QUERY_WORDS = ("key", "token", "secret", "auth", "sig", "password")
_SEPARATOR = b"\x00"  # between request strings: no shingle of a real message spans two of them


def credential_values(headers: Iterable[tuple[str, str]], query: str = "") -> list[str]:
    """The secrets a request carried, longest first: whole header values, the token after a
    `Bearer`/`Basic` scheme (and a Basic token's decoded user and password), each cookie's value,
    and credential-named query values."""
    values: set[str] = set()
    for name, value in headers:
        name, value = name.lower(), value.strip()
        if name not in CREDENTIAL_HEADERS:
            continue
        values.add(value)
        scheme, _, token = value.partition(" ")
        if scheme.lower() in AUTH_SCHEMES:
            values.add(token.strip())
            if scheme.lower() == "basic":
                values.update(_basic_parts(token.strip()))
        if name == "cookie":
            values.update(pair.partition("=")[2].strip() for pair in value.split(";"))
    for pair in query.split("&") if query else ():
        name, _, value = pair.partition("=")
        if any(word in name.lower() for word in CREDENTIAL_QUERY_WORDS):
            values.add(unquote_plus(value))
            values.add(value)
    return sorted((value for value in values if len(value) >= MIN_CREDENTIAL),
                  key=len, reverse=True)


def _basic_parts(token: str) -> list[str]:
    try:
        decoded = base64.b64decode(token, validate=True).decode("utf-8")
    except (ValueError, UnicodeDecodeError):
        return []
    user, _, password = decoded.partition(":")
    return [decoded, user, password]


# The request APIs' own field names (OpenAI, Anthropic, Gemini, Ollama, JSON Schema keywords):
# keys the provider's messages name (`max_tokens: 100000 > 8192`), never the user's words. Any
# other key (a schema's property, a tool input's field) is the user's and is looked up.
API_KEYS = frozenset({
    "model", "messages", "message", "content", "role", "name", "type", "text", "input",
    "instructions", "system", "stream", "stream_options", "include_usage", "tools", "tool_choice",
    "function", "functions", "function_call", "tool_calls", "tool_call_id", "tool_use_id",
    "arguments", "parameters", "description", "strict", "max_tokens", "max_completion_tokens",
    "max_output_tokens", "temperature", "top_p", "top_k", "stop", "stop_sequences", "seed", "n",
    "presence_penalty", "frequency_penalty", "logprobs", "top_logprobs", "logit_bias", "user",
    "metadata", "response_format", "json_schema", "schema", "reasoning", "reasoning_effort",
    "effort", "summary", "thinking", "budget_tokens", "cache_control", "previous_response_id",
    "store", "parallel_tool_calls", "service_tier", "modalities", "audio", "image_url", "url",
    "detail", "source", "media_type", "data", "id", "tool_use", "tool_result", "is_error",
    "contents", "parts", "functionCall", "functionResponse", "functionDeclarations",
    "function_declarations", "args", "response", "generationConfig", "thinkingConfig",
    "thinkingBudget", "thinkingLevel", "includeThoughts", "maxOutputTokens", "stopSequences",
    "candidateCount", "responseMimeType", "responseSchema", "safetySettings", "category",
    "threshold", "systemInstruction", "toolConfig", "functionCallingConfig", "mode",
    "allowedFunctionNames", "options", "num_predict", "num_ctx", "format", "keep_alive", "think",
    "images", "input_schema", "properties", "required", "items", "enum", "additionalProperties",
    "anyOf", "oneOf", "allOf", "$defs", "definitions", "$ref", "default", "title", "minimum",
    "maximum",
})
# Keys whose value names a kind (`"role": "assistant"`, `"type": "tool_result"`): such a value is
# the API's word when it is a short identifier, and the record keeps those kinds anyway.
KIND_KEYS = frozenset({"role", "type", "object", "mode", "effort", "reasoning_effort",
                       "media_type", "detail", "format", "service_tier", "tool_choice"})
_KIND_VALUE = re.compile(r"[a-z][a-z0-9_.:/-]{0,63}")


def request_text(body: bytes, budget: int = TEXT_BUDGET) -> bytes | None:
    """The body's string values and the user's object keys (UTF-8, a separator between them), or
    the body itself when it is not JSON; None when that text is larger than `budget`."""
    try:
        obj = json.loads(body) if body.lstrip()[:1] in (b"{", b"[") else None
    except ValueError:
        obj = None
    if obj is None:
        return body if len(body) <= budget else None
    pieces: list[bytes] = []
    size = 0
    stack: list = [obj]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for key, value in item.items():
                if key not in API_KEYS:
                    stack.append(key)
                if not (key in KIND_KEYS and isinstance(value, str)
                        and _KIND_VALUE.fullmatch(value)):
                    stack.append(value)
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str) and item:
            piece = item.encode("utf-8", "surrogatepass")
            size += len(piece) + 1
            if size > budget:
                return None
            pieces.append(piece)
    return _SEPARATOR.join(pieces)


def _shingles(data: bytes) -> list[int]:
    """Every 8-byte window of `data` as an int, by its start position."""
    order = sys.byteorder
    return [int.from_bytes(data[i:i + MIN_RUN], order) for i in range(len(data) - MIN_RUN + 1)]


def _shingles_in(data: bytes, wanted: set[int]) -> set[int]:
    """Those of `wanted` that occur in `data`: eight aligned views of `data` as 64-bit words cover
    every window; each is intersected in C, never kept as a set."""
    found: set[int] = set()
    for shift in range(MIN_RUN):
        usable = (len(data) - shift) // MIN_RUN * MIN_RUN
        if usable <= 0:
            break
        words = array("Q")
        words.frombytes(data[shift:shift + usable])
        found |= wanted.intersection(words)
    return found


class RequestEchoes:
    """One request's credentials and body, to clean what the record keeps from its answer."""

    def __init__(self, credentials: Iterable[str] = (), body: bytes = b"",
                 complete: bool = True, kept: Iterable[str] = ()):
        self.credentials = [value for value in credentials if len(value) >= MIN_CREDENTIAL]
        self._body = body if complete else None  # a streamed body was never held whole
        # Values the record keeps from the request anyway (the model, tool names): a message that
        # names them says nothing new, so they stay readable.
        self.kept = sorted({value for value in kept if value and len(value) >= MIN_RUN},
                           key=len, reverse=True)
        self._text: bytes | None = None
        self._checked = False
        # After `check_early`: the message shingles looked up, and those the request has too.
        self._looked_up: set[int] | None = None
        self._found: set[int] = set()

    @classmethod
    def from_request(cls, headers: Iterable[tuple[str, str]], query: str, body: bytes,
                     complete: bool, kept: Iterable[str] = ()) -> "RequestEchoes":
        return cls(credential_values(headers, query), body, complete, kept)

    def release_body(self) -> None:
        """No message will need checking (the caller knows): hold the body no longer. Should one
        come after all, it is dropped as unchecked, never kept unchecked."""
        if not self._checked:
            self._checked = True
            self._body = None

    def check_early(self, texts: list[str | None]) -> None:
        """Look the messages' runs up in the request now, at the end of the exchange, and let the
        request go: records wait in the store's queue (up to its limit) when the disk is slow,
        and none of them may hold a request body there. `clean_all` later replaces runs from
        what was found here; a text it was not given here is dropped as unchecked."""
        texts = [self.remove_credentials(text) for text in texts if isinstance(text, str)]
        shingles = set().union(*(_shingles(text.encode("utf-8", "surrogatepass"))
                                 for text in texts))
        lookup = self._lookup() if shingles else None
        if lookup is not None:
            self._found = _shingles_in(lookup, shingles)
            self._looked_up = shingles
        self._text = None  # too large stays known: `_checked` is set and `_looked_up` None
        if not shingles:
            self.release_body()

    @property
    def holds_body(self) -> bool:
        return self._body is not None or self._text is not None

    @property
    def too_large(self) -> bool:
        """The body could not be checked: messages from upstream are dropped, not kept."""
        return self._looked_up is None and self._lookup() is None

    def _lookup(self) -> bytes | None:
        """The request's text to look echoes up in, read once and only when first needed."""
        if not self._checked:
            self._checked = True
            body_text = request_text(self._body) if self._body is not None else None
            self._body = None  # the body is not needed again
            if body_text is not None:
                secrets = [value.encode("utf-8", "surrogatepass") for value in self.credentials]
                self._text = _SEPARATOR.join([body_text, *secrets])
        return self._text

    def remove_credentials(self, text: str) -> str:
        for value in self.credentials:
            if value in text:
                text = text.replace(value, REDACTED)
        return text

    def clean(self, text: str) -> str:
        return self.clean_all([text])[0]

    def clean_all(self, texts: list[str | None]) -> list[str | None]:
        """Each text with credentials removed and echoed runs replaced; one pass over the request
        for them all. The caller checks `too_large` first: without a lookup only credentials go."""
        texts = [self.remove_credentials(text) if isinstance(text, str) else text
                 for text in texts]
        encoded = [text.encode("utf-8", "surrogatepass") if isinstance(text, str) else b""
                   for text in texts]
        shingles = [_shingles(data) for data in encoded]
        if self._looked_up is not None:  # checked at the end of the exchange
            found = self._found
            unchecked = [not self._looked_up.issuperset(grams) for grams in shingles]
            if any(unchecked):  # never kept unchecked: the request is gone
                texts = [None if drop else text for text, drop in zip(texts, unchecked)]
        else:
            lookup = self._lookup()
            if lookup is None:
                return texts
            found = _shingles_in(lookup, set().union(*shingles))
        if not found:
            return texts
        return [self._replace_runs(text, data, grams, found) if isinstance(text, str) else text
                for text, data, grams in zip(texts, encoded, shingles)]

    def _replace_runs(self, text: str, data: bytes, grams: list[int], found: set[int]) -> str:
        covered = bytearray(len(data))  # 1 where a byte lies in a window the request has too
        for start, gram in enumerate(grams):
            if gram in found:
                covered[start:start + MIN_RUN] = b"\x01" * MIN_RUN
        if not any(covered):
            return text
        echoed = [False] * len(text)
        position = 0
        for index, char in enumerate(text):
            width = len(char.encode("utf-8", "surrogatepass"))
            echoed[index] = any(covered[position:position + width])
            position += width
        for value in self.kept:
            start = text.find(value)
            while start != -1:
                echoed[start:start + len(value)] = [False] * len(value)
                start = text.find(value, start + len(value))
        out: list[str] = []
        index = 0
        while index < len(text):
            end = index
            while end < len(text) and echoed[end] == echoed[index]:
                end += 1
            run = text[index:end]
            out.append(ECHO if echoed[index] and len(run) >= MIN_RUN else run)
            index = end
        return "".join(out)


def remove_credentials_everywhere(value: object, echoes: RequestEchoes) -> object:
    """`value` (a record or a part of it) with every credential removed from every string and
    key. Returns the same object when the request carried no credential."""
    if not echoes.credentials:
        return value
    if isinstance(value, str):
        return echoes.remove_credentials(value)
    if isinstance(value, dict):
        return {remove_credentials_everywhere(key, echoes):
                remove_credentials_everywhere(item, echoes) for key, item in value.items()}
    if isinstance(value, list):
        return [remove_credentials_everywhere(item, echoes) for item in value]
    return value
