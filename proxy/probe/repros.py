"""`streamtap probe --from DIR`: repro folders read as the probe's catalog, each one's sample
checked playable before any client runs (a bad folder stops the probe before it starts, not
half-way through)."""

from __future__ import annotations

from pathlib import Path

from streamtap.diagnostics.probe.catalog import Catalog
from streamtap.diagnostics.probe.repro_rows import repro_catalog, row_name
from streamtap.diagnostics.samples.repro import ReproError
from streamtap.proxy.probe.run import ProbeError
from streamtap.proxy.replay.playable import ReplayError, playable
from streamtap.proxy.replay.repro import load_repro


def repro_rows(folders: list[str], dialect: str | None = None) -> tuple[Catalog, str]:
    """The catalog of the repro folders' cases, in order, and their one dialect (`dialect`, the
    one the user named, must be it); ProbeError says what is wrong with which folder."""
    cases = []
    try:
        for folder in folders:
            case = load_repro(folder)
            playable(row_name(case.trace_id), case.sample,
                     Path(folder) / Path(case.sample_file).name)
            cases.append((folder, case))
        return repro_catalog(cases, dialect)
    except (ReproError, ReplayError) as exc:
        raise ProbeError(str(exc)) from None
