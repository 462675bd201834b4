"""streamtap.Proxy: the real proxy inside a test process, on a free loopback port, on a thread
with its own event loop; arm faults in-process and read the records it wrote."""

from __future__ import annotations

import dataclasses
import itertools
import logging
import sys
import tempfile
import time
from pathlib import Path

import structlog

from streamtap.proxy.config import Config, Watchdog, from_mapping
from streamtap.diagnostics.faults.rules import (FaultBook, FaultRule, parse_fault_header,
                                                rule_from_mapping)
from streamtap.proxy.serve.app import PROXY_KEY
from streamtap.proxy.serve.run import close_proxy, listen, open_proxy
from streamtap.proxy.store import TraceStore
from streamtap.proxy.testing.loopthread import Background, LoopThread
from streamtap.proxy.testing.records import Record, read_records

__all__ = ["Proxy", "FaultHandle", "Record"]
RECORD_WAIT_S = 10.0
_WATCHDOG_KEYS = tuple(f.name for f in dataclasses.fields(Watchdog))


class _StderrLogger:
    """structlog's PrintLogger, but it looks sys.stderr up at each line (pytest swaps it per
    test), and the proxy's logging is never configured globally in the user's process. Only
    errors are printed: the records say how each request went."""

    def msg(self, message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    log = debug = info = warn = warning = err = error = critical = exception = fatal = msg


def _logger():
    return structlog.wrap_logger(
        _StderrLogger(), wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR),
        processors=[structlog.processors.add_log_level,
                    structlog.processors.format_exc_info, structlog.processors.JSONRenderer()])


class FaultHandle:
    """An armed fault rule: `.name`, `.rule` (its fields), `.chosen` (requests it was chosen
    for), `.remove()`. Also a context manager that disarms it on exit."""

    def __init__(self, proxy: "Proxy", rule: FaultRule):
        self._proxy = proxy
        self.rule = rule

    @property
    def name(self) -> str:
        return self.rule.name

    @property
    def chosen(self) -> int:
        return self.rule.chosen

    def remove(self) -> bool:
        return self._proxy._on_loop(lambda book: book.remove(self.rule.name))

    def __enter__(self) -> "FaultHandle":
        return self

    def __exit__(self, *exc) -> None:
        self.remove()

    def __repr__(self) -> str:
        return f"FaultHandle({self.rule.as_dict()})"


class Proxy(Background):
    """The streamtap proxy on a free loopback port, for a test.

    `routes` maps route names to upstream URLs (or anything with a `.url`, such as a
    FakeProvider); the built-in routes stay too. `trace_dir` defaults to a temporary folder
    removed on exit (records stay readable from memory). `faults` are armed at start (each the
    `x-streamtap-fault` header's string form or a dict of rule fields). Other keyword options
    are config keys (`session`, `idle_timeout_ms`, `capture_bodies`, ...). Use it as a context
    manager (`with` or `async with`): the proxy runs on its own thread with its own event loop.
    """

    def __init__(self, routes: dict | None = None, trace_dir: str | Path | None = None,
                 faults: list | tuple = (), **options):
        data: dict = {"host": "127.0.0.1", "port": 0, "log_format": "json"}
        watchdog = {key: options.pop(key) for key in list(options) if key in _WATCHDOG_KEYS}
        if watchdog:
            data["watchdog"] = watchdog
        data.update(options)
        data["routes"] = {name: getattr(url, "url", url) for name, url in (routes or {}).items()}
        self._tempdir = None
        if trace_dir is None:
            self._tempdir = tempfile.TemporaryDirectory(prefix="streamtap-traces-")
            trace_dir = self._tempdir.name
        data["trace_dir"] = str(trace_dir)
        self.config: Config = from_mapping(data)  # ConfigError names a bad key or value
        self.trace_dir = Path(self.config.trace_dir)
        self._faults = list(faults)
        self._names = itertools.count(1)
        self._thread: LoopThread | None = None
        self._runner = None
        self._app = None
        self._store: TraceStore | None = None
        self._final: list[Record] | None = None
        self.port = 0

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> "Proxy":
        if self._thread is not None:
            return self
        self._final = None
        self._thread = LoopThread("streamtap-proxy")
        try:
            self.port = self._thread.run(self._start)
            for spec in self._faults:
                self.fault(spec) if isinstance(spec, str) else self.fault(**spec)
        except BaseException:
            self.stop()
            raise
        return self

    async def _start(self) -> int:
        # The start-up and shutdown `streamtap serve` has (serve/run.py), minus the signals and
        # the banner; an unusable trace dir is an error here, not a warning: a test needs records.
        self._store, problem, self._app, self._runner = await open_proxy(self.config, _logger())
        if problem:
            raise RuntimeError(f"streamtap cannot write records: {problem}; pass a writable "
                               "trace_dir")
        port = await listen(self._runner, self.config.host, self.config.port)
        if port is None:
            raise RuntimeError(f"streamtap could not listen on {self.config.host}:"
                               f"{self.config.port}")
        return port

    def stop(self) -> None:
        if self._thread is None:
            return
        try:
            if self._runner is not None:
                runner, store = self._runner, self._store
                self._thread.run(lambda: close_proxy(runner, store))
            self._final = read_records(self.trace_dir)
        finally:
            self._thread.stop()
            self._thread = None
            self._runner = None
            if self._tempdir is not None:
                self._tempdir.cleanup()

    # -- use ---------------------------------------------------------------------------------
    def url(self, route: str = "") -> str:
        """The proxy's URL for `route` (`http://127.0.0.1:PORT/openai`): a request to
        `url("openai") + "/v1/chat/completions"` goes to the route's URL + `/v1/chat/completions`.
        The OpenAI SDK's base URL is `url("openai") + "/v1"`, Anthropic's `url("anthropic")`."""
        if not self.port:
            raise RuntimeError("the proxy is not running: use it in a `with` block or call "
                               "start()")
        if route and route not in self.config.routes:
            raise KeyError(f"no route {route!r}; routes: {', '.join(self.config.routes)}")
        base = f"http://{self.config.host}:{self.port}"
        return f"{base}/{route}" if route else base

    def fault(self, spec: str | None = None, **fields) -> FaultHandle:
        """Arm a fault rule for the next request(s): the header's string form
        (`"reset; at=event:tool_input_delta:5"`) or keyword fields (`action="reset",
        at="event:tool_input_delta:5"`, `match={"route": "openai"}`, `times=2`...), as the
        control API takes them. A rule fires once (`times=1`) unless told otherwise; without a
        `name` it gets a unique one. A bad rule raises FaultError naming the field."""
        if (spec is None) == (not fields):
            raise TypeError("fault() takes a rule string or keyword fields (one of the two)")
        if spec is not None:
            rule = dataclasses.replace(parse_fault_header(spec), source="api")
            named = any(part.strip().startswith("name=") for part in spec.split(";")[1:])
        else:
            rule = rule_from_mapping(fields, "api")
            named = "name" in fields
        if not named:
            rule = dataclasses.replace(rule, name=f"{rule.action}-{next(self._names)}")
        self._on_loop(lambda book: book.add(rule))
        return FaultHandle(self, rule)

    def _on_loop(self, change):
        if self._thread is None:
            raise RuntimeError("the proxy is not running")
        return self._thread.call(lambda: change(self._book))

    @property
    def _book(self) -> FaultBook:
        return self._app[PROXY_KEY].faults

    def records(self, timeout: float = RECORD_WAIT_S, session: str | None = None
                ) -> list[Record]:
        """Every record so far (or one session's), oldest first, once the requests in flight
        have ended and their records are written (waits up to `timeout` seconds for that)."""
        if self._thread is None:
            return [record for record in self._final or []
                    if session is None or record.session_id == session]
        deadline = time.monotonic() + timeout
        inflight = self._app[PROXY_KEY].inflight
        while time.monotonic() < deadline:
            if not self._thread.call(lambda: len(inflight)) and not self._store.pending():
                break
            time.sleep(0.01)
        return read_records(self.trace_dir, session)

    def last_record(self, timeout: float = RECORD_WAIT_S) -> Record:
        """The newest record; AssertionError when no request has gone through yet."""
        records = self.records(timeout)
        if not records:
            raise AssertionError("no request has gone through the streamtap proxy yet; point "
                                 f"the client at {self.url() if self.port else 'the proxy'}")
        return records[-1]
