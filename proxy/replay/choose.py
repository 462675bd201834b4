"""Which sample answers a request. By default a predictable one: a sample named as a file on the
command line for the request's dialect, whatever its ending (the user named it: they want it
served); else, among a folder's samples, a complete sample of the request's dialect that matches
its `stream` flag (one that calls a tool when the request defines tools). Another ending only when
asked: `--ending`, a `model` naming a sample, or the `x-streamtap-sample` header (a sample name or
an ending). `--cycle` hands out the next sample recorded for the path (else for the dialect),
round and round, for those who want chaos."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from streamtap.diagnostics.redaction.redact import redact_path
from streamtap.diagnostics.samples.format import SAMPLE_ENDINGS

from streamtap.proxy.replay.playable import Loaded, request_dialect, request_streams

SAMPLE_HEADER = "x-streamtap-sample"
COMPLETE = "complete"  # the default: ending `terminal` with nothing wrong
_PATH_MODEL = re.compile(r"/models/([^/:]+)")
# The provider whose own samples a dialect prefers, when several are complete.
_HOME = {"openai-chat": "openai", "openai-responses": "openai",
         "anthropic-messages": "anthropic", "gemini": "gemini", "ollama-ndjson": "ollama"}


@dataclass(frozen=True)
class Ask:
    """What a request asks for, read from its path, headers and body."""

    method: str
    path: str
    model: str | None
    stream: bool
    dialect: str | None
    body: dict  # the parsed JSON body ({} when there is none)
    sample: str | None = None  # the x-streamtap-sample header

    @property
    def defines_tools(self) -> bool:
        tools = self.body.get("tools")
        return isinstance(tools, list) and bool(tools)

    @property
    def kind(self) -> str:
        return f"{self.dialect or 'unknown dialect'} ({'streamed' if self.stream else 'whole'})"


def read_ask(method: str, raw_path: str, body: bytes, headers) -> Ask:
    path = raw_path.partition("?")[0]
    try:
        obj = json.loads(body) if body else {}
    except ValueError:
        obj = {}
    obj = obj if isinstance(obj, dict) else {}
    model = obj.get("model") if isinstance(obj.get("model"), str) else None
    if model is None:  # Gemini names the model in the path
        found = _PATH_MODEL.search(path)
        model = found.group(1) if found else None
    return Ask(method, path, model, request_streams(path, obj.get("stream")),
               request_dialect(path), obj, headers.get(SAMPLE_HEADER))


def request_model(body: bytes, path: str) -> str | None:
    """The request's `model` (Gemini names it in the path instead)."""
    return read_ask("POST", path, body, {}).model


def _preference(ask: Ask):
    """A sort key, best first: a sample that calls a tool when the request defines tools (and
    one that does not otherwise), recorded for the same path, from the dialect's own provider,
    then by name."""
    path = redact_path(ask.path)
    home = _HOME.get(ask.dialect or "")
    return lambda loaded: (loaded.calls_a_tool != ask.defines_tools, loaded.request_path != path,
                           loaded.sample.get("provider") != home, loaded.name)


@dataclass
class Choice:
    loaded: Loaded
    why: str  # said in replay's log line: how this sample was picked


@dataclass
class Chooser:
    samples: list[Loaded]
    ending: str = COMPLETE  # what a request gets unless it names a sample or an ending
    cycle: bool = False
    _cursors: dict[str, int] = field(default_factory=dict)

    def by_name(self, name: str | None) -> Loaded | None:
        return next((loaded for loaded in self.samples if loaded.name == name), None) \
            if name else None

    def choose(self, ask: Ask) -> Choice | str:
        """The sample for `ask`, or why there is none (and what to do)."""
        named = self.by_name(ask.sample) or self.by_name(ask.model)
        if named is not None:
            return Choice(named, "named by the request")
        ending = self.ending
        if ask.sample is not None:
            if ask.sample not in SAMPLE_ENDINGS and ask.sample != COMPLETE:
                return (f"{SAMPLE_HEADER}: {ask.sample!r} is neither a loaded sample nor an "
                        f"ending ({COMPLETE}, {', '.join(SAMPLE_ENDINGS)})")
            ending = ask.sample
        elif self.cycle:
            return self._cycled(ask) or self._none(ask, "recorded for this path or dialect")
        elif ending == COMPLETE and (files := self.named_files(ask)):
            return Choice(files[0], f"named on the command line for {ask.kind}")
        fitting = self.fitting(ask, ending)
        if not fitting:
            what = "complete sample" if ending == COMPLETE else f"`{ending}` sample"
            return self._none(ask, f"no {what} of {ask.kind}")
        return Choice(fitting[0], f"{ending} sample of {ask.kind}")

    def fitting(self, ask: Ask, ending: str) -> list[Loaded]:
        """The samples that answer `ask` with `ending`, best first (see `_preference`)."""
        wanted = [loaded for loaded in self.samples
                  if loaded.answers_dialect == ask.dialect and loaded.streams == ask.stream
                  and (loaded.complete if ending == COMPLETE else loaded.sample["ending"] == ending)]
        return sorted(wanted, key=_preference(ask))

    def named_files(self, ask: Ask) -> list[Loaded]:
        """The samples named as files that answer `ask`'s dialect, whatever their ending, best
        first: one that matches the request's `stream` flag, then as `fitting` ranks them."""
        files = [loaded for loaded in self.samples
                 if loaded.named_file and ask.dialect
                 and loaded.answers_dialect == ask.dialect]
        rank = _preference(ask)
        return sorted(files, key=lambda loaded: (loaded.streams != ask.stream, rank(loaded)))

    def _cycled(self, ask: Ask) -> Choice | None:
        path = redact_path(ask.path)
        by_path = [loaded for loaded in self.samples if loaded.request_path == path]
        if by_path:
            return Choice(self._next(f"path:{path}", by_path), "next for this path (--cycle)")
        by_dialect = [loaded for loaded in self.samples if ask.dialect in loaded.dialects]
        if ask.dialect and by_dialect:
            return Choice(self._next(f"dialect:{ask.dialect}", by_dialect),
                          "next of its dialect (--cycle)")
        return None

    def _next(self, key: str, candidates: list[Loaded]) -> Loaded:
        turn = self._cursors.get(key, 0)
        self._cursors[key] = turn + 1
        return candidates[turn % len(candidates)]

    def _none(self, ask: Ask, what: str) -> str:
        names = ", ".join(loaded.name for loaded in self.samples[:40])
        more = f" and {len(self.samples) - 40} more" if len(self.samples) > 40 else ""
        return (f"streamtap replay has no sample for {ask.method} {ask.path}: {what} among "
                f"the loaded samples ({names}{more}); name one with the request's model or the "
                f"{SAMPLE_HEADER} header, or load samples of this dialect")
