"""Samples loaded for serving: each one read, checked and rebuilt once, with what a request needs
to know to pick it (its dialect, whether it streams, whether it is complete)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from streamtap.diagnostics.dialects import dialect_for_path
from streamtap.diagnostics.samples.rebuild import Rebuilt, rebuild, writes
from streamtap.diagnostics.samples.repro import ReproError
from streamtap.diagnostics.samples.format import SampleError, check_sample
from streamtap.proxy.replay.repro import is_repro_dir, load_repro
from streamtap.diagnostics.errors import UserError

SUFFIX = ".sample.json"


class ReplayError(UserError):
    """A sample replay cannot serve, with the file it came from and what to do."""


def request_dialect(path: str) -> str | None:
    """The dialect of the API a request calls (Gemini's whole-reply `:generateContent` too)."""
    found = dialect_for_path(path)
    if found is None and path.split("?", 1)[0].endswith(":generateContent"):
        return "gemini"
    return found


def request_streams(path: str, stream_flag: object) -> bool:
    """Whether a request asks for a stream: Gemini says so in its path, Ollama streams unless
    told not to, the others stream only with `"stream": true`."""
    dialect = dialect_for_path(path)
    if ":generateContent" in path:
        return False
    if dialect == "gemini":
        return True
    if dialect == "ollama-ndjson":
        return stream_flag is not False
    return stream_flag is True


@dataclass
class Loaded:
    name: str  # the file name without `.sample.json`: what a request's `model` can pick
    path: Path | None  # None for a scripted stream
    sample: dict
    rebuilt: Rebuilt | None
    writes: list[tuple[float, bytes]]
    speed: float = 1.0  # this sample's own timing factor (the server's applies on top)
    # Named as a file on the command line, not found in a folder: what the user wants served
    # for its dialect, whatever its ending (the "complete by default" rule is for folders).
    named_file: bool = False

    @classmethod
    def from_sample(cls, name: str, sample: dict, path: Path | None = None,
                    speed: float = 1.0) -> "Loaded":
        rebuilt = rebuild(sample)
        return cls(name, path, sample, rebuilt, writes(sample, rebuilt), speed)

    @property
    def request_path(self) -> str:
        return (self.sample.get("request") or {}).get("path") or ""

    @property
    def dialects(self) -> set[str]:
        names = {self.sample.get("dialect"), dialect_for_path(self.request_path)}
        return {name for name in names if name}

    @property
    def answers_dialect(self) -> str | None:
        """The dialect of the requests this sample answers (a `json` reply answers the
        dialect its request path names)."""
        return request_dialect(self.request_path) or self.sample.get("dialect")

    @property
    def streams(self) -> bool:
        """Whether it answers a streaming request (an HTTP error counts for the kind of
        request it answered)."""
        return request_streams(self.request_path, (self.sample.get("request") or {}).get("stream"))

    @property
    def complete(self) -> bool:
        """Ended with its terminal event and nothing went wrong (no in-stream error)."""
        outcome = self.sample.get("outcome") or {}
        return self.sample["ending"] == "terminal" and outcome.get("boundary") in (None, "none")

    @property
    def calls_a_tool(self) -> bool:
        calls = (self.sample.get("stream") or {}).get("tool_calls") or []
        counts = (self.sample.get("stream") or {}).get("event_counts") or {}
        return bool(calls) or bool(counts.get("tool_call"))


def sample_name(path: Path) -> str:
    name = path.name
    return name[:-len(SUFFIX)] if name.endswith(SUFFIX) else path.stem


def playable(name: str, sample: object, path: Path | None = None) -> Loaded:
    """A sample checked and rebuilt, ready to serve; or ReplayError naming its file (else its
    name) and what to do."""
    where = path or name
    try:
        sample = check_sample(sample)
    except SampleError as exc:
        raise ReplayError(f"{where}: not a usable sample: {exc}") from exc
    try:
        return Loaded.from_sample(name, sample, path)
    except (AttributeError, IndexError, KeyError, TypeError, ValueError) as exc:
        raise ReplayError(f"{where}: the sample's frames or shapes are malformed "
                          f"({type(exc).__name__}: {exc}); export it again with "
                          "`streamtap samples export`") from exc


def load_one(path: Path, named_file: bool = False) -> Loaded:
    try:
        sample = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ReplayError(f"{path}: cannot read it: {exc.strerror or exc}") from exc
    except ValueError as exc:
        raise ReplayError(f"{path}: not a usable sample: {exc}") from exc
    loaded = playable(sample_name(path), sample, path)
    loaded.named_file = named_file
    return loaded


def load_library(targets: list[str]) -> list[Loaded]:
    """Every sample named: files as given (marked `named_file`), folders' `*.sample.json` in
    name order; a repro folder's case is served like a file named (whatever its ending: that is
    what the folder is for)."""
    loaded: list[Loaded] = []
    for target in targets:
        path = Path(target)
        if path.is_dir() and is_repro_dir(path):
            try:
                case = load_repro(path)
            except ReproError as exc:
                raise ReplayError(f"{path}: {exc}") from exc
            loaded.append(load_one(path / Path(case.sample_file).name, named_file=True))
        elif path.is_dir():
            files = sorted(path.glob(f"*{SUFFIX}"))
            if not files:
                raise ReplayError(f"{path}: no *{SUFFIX} files in this folder; export some with "
                                  "`streamtap samples export -o DIR`")
            loaded.extend(load_one(file) for file in files)
        elif path.exists():
            loaded.append(load_one(path, named_file=True))
        else:
            raise ReplayError(f"{path}: no such file or folder")
    return loaded
