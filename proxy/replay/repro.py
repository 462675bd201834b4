"""`streamtap repro TRACE_ID`: write one recorded failure as a folder that reproduces it (its
sample, a manifest, a pytest test and a Node `node:test` file), and read such a folder back.

The two test files are the same for every repro (they read repro.json next to them); they are
copied from repro_kit/ under names carrying the trace id, so that several repros can sit in one
test suite.
"""

from __future__ import annotations

import json
import os
from importlib import resources
from pathlib import Path

from streamtap.diagnostics.samples.repro import (MANIFEST_NAME, SAMPLE_NAME, ReproCase,
                                                 ReproError, build_repro, read_case)
from streamtap.proxy.readout.traces import TraceError, find_trace
from streamtap.proxy.replay.sample_files import dump_sample

KIT = ("test_repro.py", "repro.test.mjs")


def is_repro_dir(path: Path) -> bool:
    return (path / MANIFEST_NAME).is_file()


def kit_file_names(trace_id: str) -> tuple[str, str]:
    """`test_repro_<id>.py` and `repro_<id>.test.mjs`: pytest wants unique module names."""
    short = trace_id[:12]
    return f"test_repro_{short}.py", f"repro_{short}.test.mjs"


def default_out(trace_id: str) -> Path:
    return Path(f"streamtap-repro-{trace_id[:12]}")


def _trace_of(folder: Path) -> str | None:
    try:
        manifest = json.loads((folder / MANIFEST_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return manifest.get("trace_id") if isinstance(manifest, dict) else None


def _write(path: Path, text: str) -> None:
    temp = path.with_name(f".{path.name}.tmp")
    temp.write_text(text, encoding="utf-8")
    os.replace(temp, path)


def write_repro(trace_dir: str | os.PathLike, ref: str | None,
                out: str | os.PathLike | None = None, *, last: bool = False,
                failed: bool = False) -> tuple[Path, dict]:
    """Write the repro of trace `ref` (an id, an unambiguous prefix or a record file; with
    `last`, the newest trace, the newest failed one with `failed`) into `out`; return the folder
    and its manifest."""
    try:
        record = find_trace(Path(trace_dir), ref, last=last, failed=failed)
    except TraceError as exc:
        raise ReproError(str(exc)) from None
    sample, manifest = build_repro(record)
    folder = Path(out) if out is not None else default_out(manifest["trace_id"])
    try:
        folder.mkdir(parents=True, exist_ok=True)
        if any(folder.iterdir()) and not is_repro_dir(folder):
            raise ReproError(f"{folder} holds other files; pick an empty folder with --out")
        if is_repro_dir(folder):  # written again in place, never over another trace's repro
            held = _trace_of(folder)
            if held != manifest["trace_id"]:
                raise ReproError(f"{folder} holds the repro of trace {held or '(unreadable)'}; "
                                 "pick another folder with --out")
        kit = resources.files("streamtap.proxy.replay") / "repro_kit"
        for source, name in zip(KIT, kit_file_names(manifest["trace_id"])):
            _write(folder / name, (kit / source).read_text(encoding="utf-8"))
        _write(folder / SAMPLE_NAME, dump_sample(sample))
        _write(folder / MANIFEST_NAME, json.dumps(manifest, indent=1) + "\n")
    except OSError as exc:
        raise ReproError(f"cannot write into {folder}: {exc.strerror or exc}; pick a writable "
                         "folder with --out") from None
    return folder, manifest


def load_repro(folder: str | os.PathLike) -> ReproCase:
    """The case a repro folder holds (for `replay DIR` and `probe --from DIR`)."""
    folder = Path(folder)
    if not is_repro_dir(folder):
        raise ReproError(f"{folder} is not a repro folder (no {MANIFEST_NAME}); make one with "
                         "`streamtap repro TRACE_ID --out DIR`")
    try:
        manifest = json.loads((folder / MANIFEST_NAME).read_text(encoding="utf-8"))
        name = manifest.get("sample", SAMPLE_NAME) if isinstance(manifest, dict) else SAMPLE_NAME
        # a name in the folder, never a path out of it
        sample = json.loads((folder / Path(str(name)).name).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ReproError(f"{folder}: cannot read it: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise ReproError(f"{folder}: a file is not JSON ({exc}); make the repro again with "
                         "`streamtap repro TRACE_ID`") from None
    return read_case(manifest, sample)
