"""Failure rates from index lines: per group (route, provider, model, upstream host, session,
boundary or phase), how many requests, how many completed, how many ended at each boundary, how
many ended in a way a client most likely took for success, what the client saw (`client_sees`:
silent truncations and hangs behind an ok status too), and the timings' percentiles.

Index lines in, table data out; nothing here reads a file or a clock. Lines arrive as the tuples
of diagnostics/record/index_fields.FieldReader (raw JSON text or decoded values); a value is
decoded once per distinct value when the table is made, so a hundred thousand lines cost little
more than their count. Percentiles are nearest-rank: p90 is the smallest value that at least 90%
of the values are at or below, always a value that was seen.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from operator import itemgetter

from streamtap.diagnostics.record.index_fields import ABSENT, FieldReader, decode
from streamtap.diagnostics.record.schema import INDEX_KEYS
from streamtap.diagnostics.verdict.client_sees import VALUES as CLIENT_SEES
from streamtap.diagnostics.dialects.events import BOUNDARIES

# The index fields stats reads besides the one it groups by.
COUNTED = ("ok", "boundary", "evidence", "client_sees", "terminal_after_error")
TIMED = ("headers_ms", "first_event_ms", "duration_ms", "silence_ms")
# --by NAME -> the index field it groups by.
GROUP_FIELDS = {"route": "route", "provider": "provider", "model": "model",
                "upstream": "upstream_host", "session": "session_id", "boundary": "boundary",
                "phase": "phase"}
# (key, label) of the timings, in TIMED order.
TIMINGS = (("headers", "time to headers"), ("first_event", "time to first event"),
           ("duration", "duration"), ("silence", "longest silence"))
PERCENTILES = (50, 90, 99)
# Endings a client most likely took for success, and what marks them. A clean close without the
# terminal event is what classify.py calls provider_close (evidence clean_close +
# no_terminal_event), or the same ending injected by a fault rule.
MISTAKEN_FOR_SUCCESS = {
    "clean_close_no_terminal": "ended cleanly without the terminal event ([DONE], "
                               "message_stop, response.completed...)",
    "terminal_after_error": "the terminal event came after an error inside the stream",
}
INJECTED_CLEAN_CLOSES = frozenset({"injected_close", "injected_drop_terminal"})
UNKNOWN = "-"  # the group of lines without the field (a request that named no model)
# What the client saw on a line written before index lines carried client_sees (or not one of
# its words): counted apart, never as one of them.
UNKNOWN_SEES = "unknown"


@dataclass(frozen=True)
class Timing:
    """Nearest-rank percentiles of one timing, in ms; `n` values had it (None: never reached)."""

    p50: float | None
    p90: float | None
    p99: float | None
    n: int


@dataclass(frozen=True)
class Group:
    key: str
    requests: int
    completed: int
    boundaries: dict[str, int]  # boundary (never `none`) -> requests that ended there
    endings: dict[str, int]  # MISTAKEN_FOR_SUCCESS name -> requests
    client_sees: dict[str, int]  # a CLIENT_SEES word or UNKNOWN_SEES -> requests
    timings: dict[str, Timing]  # TIMINGS key -> percentiles


@dataclass(frozen=True)
class StatsTable:
    by: str
    groups: tuple[Group, ...]  # most requests first
    total: Group
    boundaries: tuple[str, ...]  # the boundary columns: those that occur, in BOUNDARIES order
    unknown: int  # lines from before the index carried evidence and timings: endings unknown
    client_sees: tuple[str, ...]  # CLIENT_SEES, and UNKNOWN_SEES when a line lacked the field
    unknown_client_sees: int  # lines without client_sees (written before it was kept)


def percentile(ordered: list[float], p: int) -> float | None:
    if not ordered:
        return None
    return ordered[max(1, math.ceil(p / 100 * len(ordered))) - 1]


def _timing(values: list[float]) -> Timing:
    values.sort()
    return Timing(*(percentile(values, p) for p in PERCENTILES), n=len(values))


_NUMERIC = frozenset({bytes, int, float})  # bool is not a timing, though float(True) works


def _numbers(values: tuple) -> list[float]:
    """The timings of a group as floats. Raw JSON text is a number or null (FieldReader's
    pattern); a decoded value is kept only if it is a number: null, a field the line lacks and a
    foreign line's `"headers_ms": "soon"` are left out."""
    return list(map(float, [value for value in values
                            if value.__class__ in _NUMERIC and value != b"null"]))


def _hashable(value: object) -> object:
    """A value a counting key can hold: a list or an object (a hand-edited line's) as its JSON
    text, which then counts as no known word."""
    return json.dumps(value) if isinstance(value, (list, dict)) else value


def _name(value: object) -> str:
    value = decode(value)
    if value is None or value is ABSENT or value == "":
        return UNKNOWN
    return str(value)


class Tally:
    """Counts index lines as they come; `table()` makes the table. `reader` reads from an index
    line the fields `add` takes."""

    def __init__(self, by: str = "route"):
        if by not in GROUP_FIELDS:
            raise ValueError(f"cannot group by {by!r}; choose one of {', '.join(GROUP_FIELDS)}")
        self.by = by
        wanted = {GROUP_FIELDS[by], *COUNTED, *TIMED}
        fields = tuple(key for key in INDEX_KEYS if key in wanted)
        self.reader = FieldReader(fields)
        self._group = fields.index(GROUP_FIELDS[by])
        # C-level picks of a line's tuple: one call each per line of 100,000
        self._counted = itemgetter(self._group, *map(fields.index, COUNTED))
        self._timed = itemgetter(*map(fields.index, TIMED))
        # (group, ok, boundary, evidence, client sees, after error) -> n
        self._counts: dict[tuple, int] = {}
        self._times: dict[object, list[tuple]] = {}  # group -> each line's TIMED values

    def add(self, values: tuple, session: str | None = None) -> None:
        """One line's fields, from self.reader; `session` names the folder of a line too old to
        name its own session."""
        key = self._counted(values)
        group = key[0]
        if group is ABSENT and session is not None and self.by == "session":
            group = session
            key = (group, *key[1:])
        try:
            self._counts[key] = self._counts.get(key, 0) + 1
        except TypeError:  # only a line json.loads read can hold a list or an object
            key = tuple(map(_hashable, key))
            group = key[0]
            self._counts[key] = self._counts.get(key, 0) + 1
        times = self._times.get(group)
        if times is None:
            times = self._times[group] = []
        times.append(self._timed(values))  # one tuple per line, split into columns once

    def table(self) -> StatsTable:
        counts: dict[str, dict] = {}
        unknown = unknown_sees = 0
        for (group, ok, boundary, evidence, sees, after_error), n in self._counts.items():
            entry = counts.setdefault(_name(group), {"requests": 0, "completed": 0,
                                                     "boundaries": {}, "endings": {},
                                                     "client_sees": {}})
            entry["requests"] += n
            sees = decode(sees)
            if sees not in CLIENT_SEES:
                sees = UNKNOWN_SEES
                unknown_sees += n
            entry["client_sees"][sees] = entry["client_sees"].get(sees, 0) + n
            boundary = _name(boundary)
            if decode(ok) is True:
                entry["completed"] += n
            else:
                boundary = "unknown" if boundary == UNKNOWN else boundary
                entry["boundaries"][boundary] = entry["boundaries"].get(boundary, 0) + n
            evidence = decode(evidence)
            if evidence is ABSENT:
                unknown += n
            clean = boundary == "provider_close" or evidence in INJECTED_CLEAN_CLOSES
            for ending, seen in (("clean_close_no_terminal", clean),
                                 ("terminal_after_error", decode(after_error) is True)):
                if seen:
                    entry["endings"][ending] = entry["endings"].get(ending, 0) + n
        times: dict[str, list[list[float]]] = {}
        for group, rows in self._times.items():
            merged = times.setdefault(_name(group), [[] for _ in TIMINGS])
            for into, values in zip(merged, zip(*rows)):
                into.extend(_numbers(values))
        groups = [self._group_of(key, entry, times[key]) for key, entry in counts.items()]
        groups.sort(key=lambda group: (-group.requests, group.key))
        total = _total(groups, [sum(lists, []) for lists in zip(*times.values())]
                       if times else [[] for _ in TIMINGS])
        seen = {boundary for group in groups for boundary in group.boundaries}
        columns = tuple(b for b in BOUNDARIES if b in seen) + tuple(sorted(seen - set(BOUNDARIES)))
        sees_columns = CLIENT_SEES + ((UNKNOWN_SEES,) if unknown_sees else ())
        return StatsTable(self.by, tuple(groups), total, columns, unknown, sees_columns,
                          unknown_sees)

    @staticmethod
    def _group_of(key: str, entry: dict, times: list[list[float]]) -> Group:
        return Group(key, entry["requests"], entry["completed"], entry["boundaries"],
                     entry["endings"], entry["client_sees"],
                     {name: _timing(values) for (name, _), values in zip(TIMINGS, times)})


def _total(groups: list[Group], times: list[list[float]]) -> Group:
    boundaries: dict[str, int] = {}
    endings: dict[str, int] = {}
    client_sees: dict[str, int] = {}
    for group in groups:
        for into, counts in ((boundaries, group.boundaries), (endings, group.endings),
                             (client_sees, group.client_sees)):
            for name, n in counts.items():
                into[name] = into.get(name, 0) + n
    return Group("all", sum(group.requests for group in groups),
                 sum(group.completed for group in groups), boundaries, endings, client_sees,
                 {name: _timing(values) for (name, _), values in zip(TIMINGS, times)})


def tally_lines(lines: list[dict], by: str = "route") -> StatsTable:
    """The table of index lines already parsed (the live page's and the report's)."""
    tally = Tally(by)
    of = tally.reader.of
    for line in lines:
        tally.add(of(line))
    return tally.table()
