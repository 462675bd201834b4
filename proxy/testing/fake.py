"""FakeProvider: a fake upstream on a free loopback port that answers like a provider, with
scripted streams, replayed samples, or (by default) a plausible answer to each request. It is
`streamtap replay`'s server with a chooser of its own: the same rebuild plays the frames and the
same endings machinery resets, truncates or stalls."""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from aiohttp import web

from streamtap.diagnostics.samples.scripted import ScriptError, default_answer, scripted_sample

from streamtap.proxy.replay.choose import Ask, Choice, Chooser
from streamtap.proxy.replay.bundled import bundled_samples_dir
from streamtap.proxy.replay.playable import (Loaded, ReplayError, load_library, playable,
                                            sample_name)
from streamtap.proxy.replay.sample_files import ExportError, sample_files
from streamtap.proxy.replay.server import build_replay_app
from streamtap.proxy.testing.loopthread import LoopbackServer

__all__ = ["FakeProvider", "ScriptedStream", "ScriptError"]


@dataclass(frozen=True)
class ScriptedStream:
    """A stream made by `FakeProvider.stream(...)`: a sample of its dialect, rebuilt and ended
    like a replayed one."""

    dialect: str
    loaded: Loaded

    @property
    def ending(self) -> str:
        return self.loaded.sample["ending"]


@dataclass(frozen=True)
class Served:
    """One request the fake answered: its path, the sample or script, and how it ends."""

    method: str
    path: str
    name: str
    ending: str
    why: str


class _FakeChooser:
    """A sample the request names (model or x-streamtap-sample), else the next scripted stream
    of its dialect, else the default answer built from the request itself."""

    def __init__(self, scripted: list[ScriptedStream], load: Callable[[], list[Loaded]],
                 names: set[str]):
        self.scripted = deque(scripted)
        self.names = names  # the sample names, known without loading the samples
        self._load = load
        self._library: Chooser | None = None
        self.served: list[Served] = []
        self.answer: str | None = None  # `text` or `tool_call` whatever a request asks for
        self.standing: Loaded | None = None  # answers its dialect's requests (serve_sample)
        self.standing_left: int | None = None  # how many more; None: every one

    @property
    def library(self) -> Chooser:
        """The samples, loaded when a request first names one (the bundled corpus takes a
        fifth of a second to rebuild, and most tests never ask for it)."""
        if self._library is None:
            self._library = Chooser(self._load())
        return self._library

    def choose(self, ask: Ask) -> Choice | str:
        choice = self._choose(ask)
        if isinstance(choice, Choice):
            loaded = choice.loaded
            self.served.append(Served(ask.method, ask.path, loaded.name,
                                      loaded.sample["ending"], choice.why))
        return choice

    def _choose(self, ask: Ask) -> Choice | str:
        if ask.sample is not None or (ask.model in self.names
                                      and self.library.by_name(ask.model)):
            return self.library.choose(ask)
        standing = self.standing
        if standing is not None and standing.answers_dialect == ask.dialect:
            if self.standing_left is not None:
                self.standing_left -= 1
                if self.standing_left <= 0:
                    self.standing = None
            return Choice(standing, "the sample it was told to serve")
        for script in list(self.scripted):
            if script.loaded.answers_dialect == ask.dialect:
                self.scripted.remove(script)
                return Choice(script.loaded, "the next scripted stream of its dialect")
        if ask.dialect is None:
            return (f"the fake provider does not know the API at {ask.path}: it answers "
                    "/v1/chat/completions, /v1/responses, /v1/messages, Gemini "
                    ":generateContent/:streamGenerateContent and Ollama /api/chat")
        dialect = "gemini" if ask.dialect == "gemini" else ask.dialect
        sample = default_answer(dialect, ask.body, ask.stream, ask.model, self.answer)
        tools = ask.defines_tools if self.answer is None else self.answer == "tool_call"
        kind = "tool call" if tools else "text answer"
        return Choice(Loaded.from_sample(f"default-{kind.replace(' ', '-')}", sample),
                      f"the default {kind} for {ask.kind}")


class FakeProvider(LoopbackServer):
    """A fake LLM provider on a free loopback port (`.url`), for tests without network or key.

    `FakeProvider(*streams)` serves the scripted streams (made with `FakeProvider.stream`) one per
    request, each to the next request of its dialect; a request with no script left gets a
    default answer in its dialect and `stream` flag: a call of its first tool (arguments in at
    least 8 pieces) when it defines tools, else a text answer of at least 10 deltas, both ending
    normally. A request can also ask for a sample by name or ending, with its `model` or the
    `x-streamtap-sample` header: from `samples` (files or folders; default: the corpus that
    ships with streamtap), played at `speed`. `serve_sample(...)` has one sample answer its
    dialect's requests (`streamtap probe --from DIR` serves a repro's so).

    Use it as a context manager (`with` or `async with`); the server runs on its own thread.
    """

    what = "the fake provider"

    def __init__(self, *streams: ScriptedStream, samples: str | os.PathLike | list | None = None,
                 speed: float = 1.0, host: str = "127.0.0.1"):
        for stream in streams:
            if not isinstance(stream, ScriptedStream):
                raise TypeError(f"FakeProvider takes streams made with FakeProvider.stream(...), "
                                f"got {stream!r}")
        if not speed > 0:
            raise ValueError(f"speed must be more than 0, got {speed}")
        targets = samples if isinstance(samples, (list, tuple)) else [
            samples if samples is not None else bundled_samples_dir()]

        def load() -> list[Loaded]:
            try:
                library = load_library([str(target) for target in targets])
            except ReplayError as exc:
                raise ValueError(str(exc)) from None
            for loaded in library:
                loaded.speed = speed
            return library

        try:
            names = {sample_name(path) for path in sample_files(list(targets))}
        except ExportError as exc:
            raise ValueError(str(exc)) from None
        self._chooser = _FakeChooser(list(streams), load, names)
        if samples is not None:
            self._chooser.library  # samples the caller named: a bad file is said now
        super().__init__("streamtap-fake-provider", host)

    @staticmethod
    def stream(dialect: str, *, text: str | None = None, reasoning: str | None = None,
               tool_calls: list[dict] | None = None, ending: str = "terminal",
               at: str | None = None, speed: float = 1.0, stream: bool = True,
               status: int = 500, headers: dict[str, str] | None = None,
               model: str = "streamtap-fake", include_usage: bool = False) -> ScriptedStream:
        """A valid `dialect` stream (`openai-chat`, `openai-responses`, `anthropic-messages`,
        `gemini`, `ollama-ndjson`) holding `text`, `reasoning` and `tool_calls`
        (`[{"name": ..., "arguments": {...}}]`, arguments sent in at least 8 pieces where the
        dialect streams them), that ends as `ending` says (`terminal`, `clean_close`, `reset`,
        `truncated`, `stalled`, `http_error` with `status`, `no_response`) right after the
        trigger `at` fires (`event:<kind>:<n>`, `events:<n>`, `first_progress`; default: after
        the last delta). `speed` scales the timing (frames 10 ms apart at 1.0); `stream=False`
        makes a whole JSON reply; `include_usage` adds OpenAI Chat's usage chunk. A bad
        combination raises ScriptError saying what to change."""
        sample = scripted_sample(dialect, text=text, reasoning=reasoning, tool_calls=tool_calls,
                                 ending=ending, at=at, speed=speed, stream=stream, status=status,
                                 headers=headers, model=model, include_usage=include_usage)
        return ScriptedStream(dialect, Loaded.from_sample(f"scripted-{dialect}-{ending}", sample))

    def answer_with(self, kind: str | None) -> None:
        """Give every default answer as `kind` from now on, whatever the request asks for:
        `text`, `tool_call` (of the request's first tool, else of a stand-in `get_weather`),
        or None for what the request asks (the default)."""
        if kind not in (None, "text", "tool_call"):
            raise ValueError(f"answer_with takes 'text', 'tool_call' or None, got {kind!r}")
        self._chooser.answer = kind

    def serve_sample(self, sample: dict | None, *, name: str = "served",
                     times: int | None = None) -> None:
        """Answer the requests of `sample`'s dialect with it (a content-free sample, as
        `streamtap samples export` and `streamtap repro` write; it ends as it says): every one
        from now on, or the next `times`; None stops. A request that names a sample still gets
        the one it names. A sample that cannot be served raises ValueError saying why."""
        if times is not None and times < 1:
            raise ValueError(f"times must be 1 or more (None: every request), got {times}")
        loaded = None
        if sample is not None:
            try:
                loaded = playable(name, sample)
            except ReplayError as exc:
                raise ValueError(str(exc)) from None
        self._chooser.standing_left = times
        self._chooser.standing = loaded

    @property
    def url(self) -> str:
        """`http://127.0.0.1:PORT`: give it to a route (`Proxy(routes={"openai": fake.url})`)
        or straight to a client (plus `/v1` for the OpenAI SDK)."""
        return super().url

    @property
    def served(self) -> list[Served]:
        """Each request answered so far, in order: path, sample name, ending, why."""
        return list(self._chooser.served)

    def make_app(self) -> web.Application:
        return build_replay_app(self._chooser, 1.0, log_requests=False)
