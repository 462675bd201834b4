"""A non-streamed JSON reply (`"stream": false`, or any error body): ids, usage, finish reason and
error fields from the body, never its content."""

from __future__ import annotations

from streamtap.diagnostics.dialects import events as ev
from streamtap.diagnostics.redaction.messages import provider_message
from streamtap.diagnostics.dialects.stream import token
from streamtap.diagnostics.dialects.base import FRAMING_BODY, Dialect, error_fields, load_json
from streamtap.diagnostics.dialects.usage import normalize_usage


def finish_reason_of(obj: dict) -> object:
    choices = obj.get("choices") or obj.get("candidates")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        first = choices[0]
        return first.get("finish_reason") or first.get("finishReason")
    if "stop_reason" in obj:
        return obj.get("stop_reason")
    if "done_reason" in obj:
        return obj.get("done_reason")
    if obj.get("object") == "response":
        details = obj.get("incomplete_details")
        if isinstance(details, dict) and details.get("reason"):
            return details.get("reason")
        return obj.get("status")
    return None


class JsonBody(Dialect):
    name = "json"
    framing = FRAMING_BODY

    def __init__(self, state):
        super().__init__(state)
        # The provider's error fields when the body is an error (the recorder decides whether
        # that is an HTTP error or an error inside a 200).
        self.error: dict | None = None

    def on_body(self, body: bytes, t_ms: float) -> None:
        if body.lstrip()[:1] not in (b"{", b"["):
            return  # empty, or not JSON at all (a gateway's HTML error page): nothing to read
        obj = load_json(body, self.state)
        if obj is None:
            return
        self.state.emit(ev.META, t_ms)
        self.error = error_fields(obj)
        if self.error is not None or not isinstance(obj, dict):
            return
        self.state.set_response_id(obj.get("id") or obj.get("responseId"))
        usage = normalize_usage(obj.get("usage") or obj.get("usageMetadata")
                                or (obj if "eval_count" in obj else None))
        if usage:
            self.state.set_usage(**usage)
            self.state.emit(ev.USAGE, t_ms)
        reason = finish_reason_of(obj)
        if reason is not None:
            self.state.set_finish_reason(reason)
            self.state.emit(ev.FINISH, t_ms)
            self.state.set_terminal("body", t_ms)


def provider_error_summary(fields: dict | None) -> dict:
    """The record's `error_type`/`error_code`/`error_message` from error fields: tokens, and a
    message cut to one short sentence without quoted spans or keys (see redaction/messages.py). The
    recorder settles the message again at the end, checked against the request's own values."""
    if not fields:
        return {}
    return {
        "error_type": token(fields.get("type")),
        "error_code": token(fields.get("code")),
        "error_message": provider_message(fields.get("message")),
    }
