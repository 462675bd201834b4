"""The catalog of ways a stream can end, as one table: each row names the ending, the dialects it
applies to, how streamtap makes it (a fault rule in the `x-streamtap-fault` header's string form,
and which answer the fake provider gives so that the rule's trigger is reached) and what a user
would expect of a client.

`streamtap probe` and the pytest plugin read cases from a `Catalog`; anything that can list
`CatalogRow`s can stand in for this table: `probe --from DIR` lists repro folders' cases, rows that
answer with a recorded sample instead of arming a fault rule (see repro_rows.py).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from streamtap.diagnostics.errors import UserError

OK, RAISED, RECOVERED, SILENT, HUNG = "ok", "raised", "recovered", "SILENT", "HUNG"
GRADES = (OK, RAISED, RECOVERED, SILENT, HUNG)
ALL_DIALECTS = ("openai-chat", "openai-responses", "anthropic-messages", "gemini",
                "ollama-ndjson")
# Dialects that stream a tool call's arguments in pieces (Gemini and Ollama send a call whole).
PIECEWISE_TOOL_DIALECTS = ("openai-chat", "openai-responses", "anthropic-messages")

# What the fake provider answers during a row: the request decides (a tool call when it offers
# tools, text otherwise), or always text, or always a tool call (so a trigger in text or in tool
# arguments fires whatever the client asks for).
AS_ASKED, TEXT, TOOL_CALL = None, "text", "tool_call"


@dataclass(frozen=True)
class Expectation:
    """What a user would expect of a client: the grades that meet it, in words, and (for a
    429) how long a retry must wait."""

    accept: tuple[str, ...]
    says: str
    retry_wait_s: float | None = None


FAIL_LOUDLY = Expectation((RAISED, RECOVERED), "must not be silent: raise, or retry and finish")
NOT_SILENT_NOR_HUNG = Expectation((RAISED, RECOVERED), "must neither be silent nor hang")
TIMES_OUT = Expectation((RAISED, RECOVERED), "must end within the client's own timeout")
COMPLETES = Expectation((OK,), "must complete without waiting for the close")


@dataclass(frozen=True)
class CatalogRow:
    """One row of the catalog. `fault` is a rule's header form; `pending` says which fault
    action the row still needs (the row is skipped with that reason until it exists).

    A row with a `sample` (a content-free sample, as `streamtap repro` writes) is made the other
    way: the fake provider answers with that sample, which ends as recorded, and no fault rule
    is armed (`fault` is empty)."""

    name: str
    dialects: tuple[str, ...]
    fault: str
    answer: str | None
    expect: Expectation
    pending: str | None = None
    # Not compared nor shown: a row is known by its name, and a sample's frames are no reading.
    sample: dict | None = field(default=None, compare=False, repr=False)

    def applies_to(self, dialect: str) -> bool:
        return dialect in self.dialects

    @property
    def made_by(self) -> str:
        """How the row is made, for `--list`: its fault rule, or the recorded sample's ending."""
        if self.sample is None:
            return self.fault
        return f"the recorded sample, ending `{self.sample.get('ending')}`"


RETRY_AFTER_S = 1  # short, so a probe run stays fast; the SDKs honour any retry-after
RETRIED = Expectation((RAISED, RECOVERED), f"must be retried after retry-after ({RETRY_AFTER_S} s)",
                      retry_wait_s=RETRY_AFTER_S)
NO_SHAPE = '{"code":"InternalError","message":"peer closed connection"}'
AT3 = "at=event:text_delta:3"
ALL, TOOLS, ANTHROPIC = ALL_DIALECTS, PIECEWISE_TOOL_DIALECTS, ("anthropic-messages",)

# A row whose fault action is still being built names it in `pending` and is skipped until then
# (none today). `reset; at=request` resets before any response byte (no status line).
# `stall_before_first_byte` is a delay at `request`: the upstream is not asked and not one byte
# (no status line) goes back until the client's timeout, or the probe's limit, ends it.
CATALOG_ROWS = (  # name, dialects, how it is made (a fault rule), the fake's answer, expectation
    CatalogRow("reset_before_response", ALL, "reset; at=request", AS_ASKED, FAIL_LOUDLY),
    CatalogRow("http_500", ALL, "http_error; status=500", AS_ASKED, FAIL_LOUDLY),
    CatalogRow("http_429_retry_after", ALL, f"http_error; status=429; retry_after={RETRY_AFTER_S}",
               AS_ASKED, RETRIED),
    CatalogRow("anthropic_529", ANTHROPIC, "http_error; status=529", AS_ASKED, FAIL_LOUDLY),
    CatalogRow("reset_mid_text", ALL, f"reset; {AT3}", TEXT, FAIL_LOUDLY),
    CatalogRow("reset_mid_tool_args", TOOLS, "reset; at=event:tool_input_delta:3", TOOL_CALL,
               FAIL_LOUDLY),
    CatalogRow("chunked_cut_no_last_chunk", ALL, f"truncate; {AT3}", TEXT, FAIL_LOUDLY),
    CatalogRow("half_event_then_clean_end", ALL, f"close; {AT3}; mid_frame=true", TEXT,
               FAIL_LOUDLY),
    CatalogRow("clean_end_between_events", ALL, f"close; {AT3}", TEXT, FAIL_LOUDLY),
    CatalogRow("all_but_terminal_event", ALL, "drop_terminal", TEXT, FAIL_LOUDLY),
    CatalogRow("provider_error_event", ALL, f"error_chunk; {AT3}", TEXT, NOT_SILENT_NOR_HUNG),
    CatalogRow("wrapped_error_chunk", ALL, f"error_chunk; {AT3}; style=wrapped", TEXT,
               NOT_SILENT_NOR_HUNG),
    CatalogRow("error_frame_unknown_shape", ALL, f"error_chunk; {AT3}; body={NO_SHAPE}", TEXT,
               NOT_SILENT_NOR_HUNG),
    CatalogRow("stall_before_first_byte", ALL, "delay; at=request; latency_ms=3600000", AS_ASKED,
               TIMES_OUT),
    CatalogRow("stall_after_headers", ALL, "stall; at=headers", AS_ASKED, TIMES_OUT),
    CatalogRow("stall_mid_stream", ALL, f"stall; {AT3}", TEXT, TIMES_OUT),
    CatalogRow("stall_behind_heartbeats", ALL, f"stall; {AT3}; heartbeat_ms=1000", TEXT, TIMES_OUT),
    CatalogRow("parked_after_terminal", ALL, "hold; at=terminal", AS_ASKED, COMPLETES),
    CatalogRow("malformed_chunk_size", ALL, f"bad_chunk_size; {AT3}", TEXT, FAIL_LOUDLY),
)


class CatalogError(UserError, ValueError):
    """A name the catalog does not have; says the closest one."""


@dataclass(frozen=True)
class Catalog:
    """Cases for a probe, in order. `Catalog()` is the built-in table."""

    endings: tuple[CatalogRow, ...] = CATALOG_ROWS

    @property
    def names(self) -> list[str]:
        return [ending.name for ending in self.endings]

    def pick(self, names: list[str] | None) -> "Catalog":
        """The rows named (in the catalog's order); an unknown name raises CatalogError."""
        if not names:
            return self
        known = self.names
        for name in names:
            if name not in known:
                close = difflib.get_close_matches(name, known, n=1)
                hint = f"did you mean `{close[0]}`?" if close else f"endings: {', '.join(known)}"
                raise CatalogError(f"no ending `{name}` in the catalog; {hint}")
        return Catalog(tuple(ending for ending in self.endings if ending.name in names))

    def skip_reason(self, ending: CatalogRow, dialect: str) -> str | None:
        """Why a row is not run for this dialect, or None."""
        if ending.pending:
            return ending.pending
        if not ending.applies_to(dialect):
            return f"applies to {', '.join(ending.dialects)}, not {dialect}"
        return None
