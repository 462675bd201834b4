"""Trace records as objects: `record.outcome.boundary`, `record.stream.event_counts`. A view
over the parsed JSON (any field the record has, at any depth), read by the trace-folder reader
every command uses (proxy/readout/tracedir.py), so a record of any version we wrote reads the
same."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path

from streamtap.diagnostics.record.schema import record_as_dict
from streamtap.proxy.readout import tracedir


class View(Mapping):
    """Attribute access over a JSON object (and read-only mapping access: `view["key"]`,
    `dict(view)`, `view == {...}`): nested objects are Views, objects inside lists too."""

    __slots__ = ("_data",)

    def __init__(self, data: dict):
        object.__setattr__(self, "_data", data)

    def __getattr__(self, name: str):
        try:
            return _wrap(self._data[name])
        except KeyError:
            raise AttributeError(f"no field {name!r} here; fields: "
                                 f"{', '.join(self._data) or 'none'}") from None

    def __getitem__(self, name: str):
        return _wrap(self._data[name])

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def as_dict(self) -> dict:
        """The JSON object itself."""
        return self._data

    def __eq__(self, other: object) -> bool:
        if isinstance(other, View):
            return self._data == other._data
        return self._data == other

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({json.dumps(self._data)[:300]})"


def _wrap(value):
    if isinstance(value, dict):
        return View(value)
    if isinstance(value, list):
        return [_wrap(item) for item in value]
    return value


class Record(View):
    """One trace record. Its fields are the record's JSON keys (see README "What a trace record
    holds"): `outcome` (boundary, phase, evidence, summary), `stream` (event_counts, terminal,
    tool_calls...), `request`, `response`, `downstream`, `fault`, `timeline`, ..."""

    __slots__ = ()

    @property
    def summary(self) -> str:
        """The plain sentence saying how the stream ended."""
        return self.outcome.summary if self.outcome else ""


def read_records(trace_dir: Path, session: str | None = None) -> list[Record]:
    """Every record under a trace dir (all sessions, or one), oldest first. A trace dir or
    session with nothing recorded yet has no records (not an error), and a file that is not a
    record is left out: a test asks what its requests left, not whether the folder is tidy."""
    try:
        files = tracedir.record_files(Path(trace_dir), session)
    except tracedir.TraceError:
        return []
    found = [(record.started_at, path.name, record)
             for path, record, _ in tracedir.read_records(files) if record is not None]
    found.sort(key=lambda item: item[:2])
    # Every field of the current schema, whatever version the file was: a test reads
    # `record.close.by` of an old record as of a new one.
    return [Record(record_as_dict(record)) for _, _, record in found]
