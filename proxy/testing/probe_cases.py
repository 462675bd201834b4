"""One catalog ending on a running proxy and fake provider: armed for the client's requests,
disarmed after, and the requests it made read back as graded attempts. Shared by `streamtap
probe` (a client command) and the pytest plugin (a client function)."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator
from datetime import datetime

from streamtap.diagnostics.dialects import dialect_for_path
from streamtap.diagnostics.probe.catalog import ALL_DIALECTS, CatalogRow
from streamtap.diagnostics.probe.grade import Attempt, Run
from streamtap.proxy.testing.fixture import StreamtapFixture
from streamtap.proxy.testing.records import Record

# What a client is told to use, per dialect, in `{base_url}` and STREAMTAP_BASE_URL: the base
# URL its SDK expects (the OpenAI SDKs end it in /v1, Anthropic's does not).
_ROUTE_OF = {"openai-chat": ("openai", "/v1"), "openai-responses": ("openai", "/v1"),
             "anthropic-messages": ("anthropic", ""), "gemini": ("gemini", ""),
             "ollama-ndjson": ("ollama", "")}


def base_url(fixture: StreamtapFixture, dialect: str | None) -> str:
    """The base URL that fits `dialect`; before the dialect is known, the OpenAI SDKs' one."""
    route, suffix = _ROUTE_OF.get(dialect or "", ("openai", "/v1"))
    return fixture.url(route) + suffix


@contextlib.contextmanager
def armed(fixture: StreamtapFixture, ending: CatalogRow | None, once: bool) -> Iterator[None]:
    """While inside: the fake answers as the row says and its fault fires on every request (or
    on the first one only, `once`); a row with a sample has the fake serve it instead. None arms
    nothing: a complete stream, as the request asks."""
    if ending is None:
        yield
        return
    if ending.sample is not None:
        fixture.fake.serve_sample(ending.sample, name=ending.name, times=1 if once else None)
        try:
            yield
        finally:
            fixture.fake.serve_sample(None)
        return
    fixture.fake.answer_with(ending.answer)
    handle = fixture.fault(f"{ending.fault}; times={1 if once else 0}")
    try:
        yield
    finally:
        handle.remove()
        fixture.fake.answer_with(None)


def spoken_dialect(record: Record) -> str:
    """The dialect a request spoke: its stream's, else (a whole JSON reply, an error before the
    body) the one its path names, else what the record says (`json`, `unknown`)."""
    dialect = str(record.dialect)
    if dialect in ALL_DIALECTS:
        return dialect
    return dialect_for_path(record.request.path or "") or dialect


def first_request(records: list[Record]) -> str:
    """`METHOD PATH` of the first request, for the baseline's messages."""
    if not records:
        return ""
    request = records[0].request
    return f"{request.method or ''} {request.path or ''}".strip()


def _started_s(record: Record) -> float:
    text = record.started_at.replace("Z", "+00:00")
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return 0.0


def new_records(fixture: StreamtapFixture, seen: set[str], session: str | None = None
                ) -> list[Record]:
    """The records (of `session`, or all) written since the trace ids in `seen` (which it adds
    them to), oldest first."""
    fresh = [record for record in fixture.records(session) if record.trace_id not in seen]
    seen.update(record.trace_id for record in fresh)
    return fresh


def attempts(records: list[Record]) -> tuple[Attempt, ...]:
    """Each request as an attempt: its start in seconds after the first one's, and whether its
    stream completed at the wire."""
    if not records:
        return ()
    first = _started_s(records[0])
    return tuple(Attempt(round(_started_s(record) - first, 3),
                         record.outcome.phase == "complete",
                         record.trace_id, bool(record.fault and record.fault.fired))
                 for record in records)


def observe(fixture: StreamtapFixture, ending: CatalogRow | None, once: bool, seen: set[str],
            call: Callable[[], Run], session: str | None = None) -> tuple[Run, list[Record]]:
    """Run the client (`call` returns what its run did) with `ending` armed; that Run with the
    attempts its requests made, and their records."""
    served = len(fixture.fake.served) if fixture.fake is not None else 0
    with armed(fixture, ending, once):
        run = call()
        records = new_records(fixture, seen, session)
    made = attempts(records)
    if ending is not None and ending.sample is not None:
        # No fault rule to fire: the ending came in the requests the fake served the sample to
        # (the first ones: with `once`, a retry gets a complete stream).
        answered = sum(one.name == ending.name for one in fixture.fake.served[served:])
        made = tuple(dataclasses.replace(attempt, fault_fired=index < answered)
                     for index, attempt in enumerate(made))
    return dataclasses.replace(run, attempts=made), records
