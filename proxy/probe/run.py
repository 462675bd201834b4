"""`streamtap probe -- CMD [ARGS...]`: the user's client command run once on a complete stream
(it must succeed), then once per catalog ending, each run timed, killed past the limit, and
graded from its exit status and the records of the requests it made."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from streamtap.diagnostics.probe.baseline import BaselineError, baseline_dialect
from streamtap.diagnostics.probe.catalog import Catalog
from streamtap.diagnostics.probe.errorline import last_error_line
from streamtap.diagnostics.probe.grade import Run, Verdict, judge, skipped
from streamtap.diagnostics.views.probe import RESULT_FILE, ProbeResult
from streamtap.proxy.testing.probe_cases import (base_url, first_request, new_records, observe,
                                         spoken_dialect)
from streamtap.proxy.testing.fixture import FAKE_KEYS, StreamtapFixture
from streamtap.diagnostics.errors import UserError

DEFAULT_TIMEOUT_S = 30.0
STDERR_TAIL = 64 * 1024  # the end of the client's stderr is where its last error is


class ProbeError(UserError, RuntimeError):
    """The probe cannot grade this client; says why and what to change."""


@dataclass
class ProbeOptions:
    command: list[str]
    catalog: Catalog = field(default_factory=Catalog)
    dialect: str | None = None  # None: the dialect of the client's first request
    once: bool = False  # the ending on the first attempt only, so a retry can recover
    timeout_s: float = DEFAULT_TIMEOUT_S
    trace_dir: str = "./streamtap-traces"
    session: str | None = None  # default: probe-YYYYMMDD-HHMMSS
    pinned: dict[str, tuple[str, ...]] = field(default_factory=dict)
    dialect_named_by: str = ""  # who set `dialect` when not the user (`--from`'s folders)


def run_client(argv: list[str], env: dict[str, str], timeout_s: float) -> Run:
    """Run the command in a process group of its own, killed whole past `timeout_s`; stdout
    goes nowhere, the end of stderr gives the error line."""
    with tempfile.TemporaryFile() as stderr:
        started = time.monotonic()
        try:
            process = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL,
                                       stdout=subprocess.DEVNULL, stderr=stderr,
                                       start_new_session=True)
        except OSError as exc:
            raise ProbeError(f"cannot run `{argv[0]}`: {exc.strerror or exc}; give the "
                             "client command after `--`, as you run it yourself") from None
        killed = False
        try:
            process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            killed = True
        finally:  # past the limit, or the probe itself interrupted: no client is left behind
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        seconds = time.monotonic() - started
        size = stderr.seek(0, os.SEEK_END)
        stderr.seek(max(0, size - STDERR_TAIL))
        tail = stderr.read().decode("utf-8", "replace")
    return Run(None if killed else process.returncode, killed, seconds,
               error_line=last_error_line(tail))


class Probe:
    """A probe run: one proxy and fake provider, one session, the client run per ending."""

    def __init__(self, options: ProbeOptions):
        if not options.command:
            raise ProbeError("no client command: put it after `--`, as in "
                             "`streamtap probe -- python my_client.py`")
        self.options = options
        self.session = options.session or datetime.now().strftime("probe-%Y%m%d-%H%M%S")
        self._seen: set[str] = set()

    def _run(self, fixture: StreamtapFixture, dialect: str | None, ending=None):
        url = base_url(fixture, dialect)
        # Placeholder keys even where real ones are set: the upstream is always the fake
        # provider, so a real key would have nowhere to go but a loopback port.
        env = {**os.environ, **fixture.environment(), **FAKE_KEYS, "STREAMTAP_BASE_URL": url}
        argv = [arg.replace("{base_url}", url) for arg in self.options.command]
        return observe(fixture, ending, self.options.once, self._seen,
                       lambda: run_client(argv, env, self.options.timeout_s), self.session)

    def _baseline(self, fixture: StreamtapFixture) -> str:
        """Run the client on a complete stream; the dialect of its requests, or ProbeError."""
        run, records = self._run(fixture, self.options.dialect)
        try:
            return baseline_dialect(run, [spoken_dialect(record) for record in records],
                                    first_request(records), self.options.dialect,
                                    self.options.timeout_s, self.options.dialect_named_by)
        except BaselineError as exc:
            raise ProbeError(str(exc)) from None

    def run(self) -> ProbeResult:
        options = self.options
        trace_dir = Path(options.trace_dir)
        fixture = StreamtapFixture(trace_dir=str(trace_dir), session=self.session,
                                   session_headers=[])
        try:
            fixture.__enter__()
        except RuntimeError as exc:  # a trace dir it cannot write: the grades need the records
            raise ProbeError(str(exc)) from None
        try:
            new_records(fixture, self._seen, self.session)  # a named session's older records
            dialect = self._baseline(fixture)
            verdicts = [self._verdict(fixture, dialect, ending)
                        for ending in options.catalog.endings]
        finally:
            fixture.__exit__(None, None, None)
        # A pinned ending this run did not grade (not picked, skipped) is said, not dropped:
        # CI must not lose a pinned case quietly.
        graded = {verdict.ending for verdict in verdicts if not verdict.skipped}
        missing = tuple(name for name in options.pinned if name not in graded)
        result = ProbeResult(self.session, dialect, tuple(verdicts), missing)
        write_result(trace_dir / self.session, result)
        return result

    def _verdict(self, fixture: StreamtapFixture, dialect: str, ending) -> Verdict:
        reason = self.options.catalog.skip_reason(ending, dialect)
        if reason:
            return skipped(ending, reason)
        run, _ = self._run(fixture, dialect, ending)
        return judge(ending, run, self.options.pinned.get(ending.name, ()))


def write_result(folder: Path, result: ProbeResult) -> None:
    """The result next to the records, for `streamtap report`. A folder that cannot be written
    loses the report's probe section, not the result (printed all the same)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with open(folder / RESULT_FILE, "a") as out:
            out.write(json.dumps(result.as_dict()) + "\n")
    except OSError as exc:
        print(f"streamtap probe: cannot write {folder / RESULT_FILE} ({exc.strerror or exc}); "
              "`streamtap report` will show no probe table for this run", file=sys.stderr)
