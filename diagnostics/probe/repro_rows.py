"""Repro folders' cases (`streamtap probe --from DIR`) as rows of the probe's catalog: each row
answers the client with the recorded sample, which ends where and as the original broke, instead
of arming a fault rule; a recorded failure is graded like any ending (raised or recovered, never
silent nor hung). Pure: ReproCases in, a Catalog and its one dialect out."""

from __future__ import annotations

from streamtap.diagnostics.dialects import dialect_for_path
from streamtap.diagnostics.probe.catalog import (ALL_DIALECTS, OK, RAISED, RECOVERED, Catalog,
                                                 CatalogRow, Expectation)
from streamtap.diagnostics.samples.repro import ReproCase, ReproError

PREFIX = "repro:"
SHORT_ID = 12  # as long as the repro kit's file names: unique enough to tell repros apart
A_RECORDED_FAILURE = Expectation((RAISED, RECOVERED),
                                 "a recorded failure must neither be silent nor hang")
# A repro of a stream that did not fail (`streamtap repro` of a complete trace) still runs:
# the client must finish it.
A_RECORDED_COMPLETE = Expectation((OK,), "the recorded stream completed: so must the client")


def row_name(trace_id: str) -> str:
    """`repro:<trace id prefix>`, the row's name in the grade table, JSON and --expect."""
    return PREFIX + trace_id[:SHORT_ID]


def case_dialect(case: ReproCase) -> str | None:
    """The dialect of the requests the case answers: its stream's, else (a whole JSON reply,
    an HTTP error) the one its request path names."""
    if case.dialect in ALL_DIALECTS:
        return case.dialect
    return dialect_for_path(case.request_path)


def failed(case: ReproCase) -> bool:
    return case.ending != "terminal" or case.verdict.get("boundary") not in (None, "none")


def repro_ending(case: ReproCase) -> CatalogRow:
    """The case as a catalog row: the fake provider answers with its sample, nothing armed."""
    dialect = case_dialect(case)
    return CatalogRow(row_name(case.trace_id), (dialect,) if dialect else (), "", None,
                      A_RECORDED_FAILURE if failed(case) else A_RECORDED_COMPLETE,
                      sample=case.sample)


def repro_catalog(cases: list[tuple[str, ReproCase]], wanted: str | None = None
                  ) -> tuple[Catalog, str]:
    """The rows of `(folder, case)` pairs, in order, and their one dialect. One client speaks one
    dialect in a probe: a case of no dialect the probe answers, a mix of dialects, a `--dialect`
    (`wanted`) other than theirs, or one trace given twice raise ReproError saying what to do."""
    if not cases:
        raise ReproError("--from names no repro folder; make one with `streamtap repro "
                         "TRACE_ID --out DIR`")
    by_dialect: dict[str, list[str]] = {}
    names: dict[str, str] = {}
    for folder, case in cases:
        dialect = case_dialect(case)
        if dialect is None:
            raise ReproError(f"{folder}: the repro's dialect ({case.dialect}, request path "
                             f"{case.request_path or 'unknown'}) is none the probe's fake "
                             f"provider answers ({', '.join(ALL_DIALECTS)})")
        by_dialect.setdefault(dialect, []).append(folder)
        name = row_name(case.trace_id)
        if name in names:
            raise ReproError(f"{names[name]} and {folder} hold the repro of the same trace "
                             f"({case.trace_id}); give it once")
        names[name] = folder
    if len(by_dialect) > 1:
        mix = "; ".join(f"{dialect}: {', '.join(folders)}" for dialect, folders in
                        by_dialect.items())
        raise ReproError(f"the repro folders are of different dialects ({mix}); a probe runs "
                         "one client in one dialect: probe each dialect's folders in a run of "
                         "its own")
    (dialect,) = by_dialect
    if wanted and wanted != dialect:
        raise ReproError(f"--dialect {wanted}, but the repro folders are {dialect}: leave "
                         "--dialect out, the repro's dialect sets it")
    return Catalog(tuple(repro_ending(case) for _, case in cases)), dialect
