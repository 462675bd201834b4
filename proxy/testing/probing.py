"""What the pytest plugin's `streamtap_ending` fixture hands a test: one ending of the probe
catalog (the test runs once per ending), armed on the `streamtap` fixture's proxy and fake
provider, and `run(client)` that calls the client, grades what it did and fails the test when
the grade breaks the ending's expectation."""

from __future__ import annotations

import threading
import time
import traceback

from streamtap.diagnostics.probe.baseline import BaselineError, baseline_dialect
from streamtap.diagnostics.probe.catalog import Catalog, CatalogRow
from streamtap.diagnostics.probe.errorline import last_error_line
from streamtap.diagnostics.probe.grade import Run, Verdict, judge
from streamtap.proxy.testing.probe_cases import first_request, observe, spoken_dialect
from streamtap.proxy.testing.fixture import StreamtapFixture

DEFAULT_TIMEOUT_S = 30.0


class ProbeFailure(AssertionError):
    """The client's grade broke the ending's expectation."""


def call_client(client, timeout_s: float) -> Run:
    """Call `client()` on a thread: exit status 0 when it returns, 1 when it raises (its error
    line is `Type: message`), killed when it is still running after `timeout_s` (the thread is
    left to end when the proxy closes its connections)."""
    outcome: dict = {}

    def target() -> None:
        try:
            client()
            outcome["status"] = 0
        except BaseException as exc:  # the client's failure is the observation
            outcome["status"] = 1
            outcome["stderr"] = "".join(traceback.format_exception_only(type(exc), exc))

    started = time.monotonic()
    thread = threading.Thread(target=target, name="streamtap-probe-client", daemon=True)
    thread.start()
    thread.join(timeout_s)
    seconds = time.monotonic() - started
    if thread.is_alive():
        return Run(None, True, seconds)
    return Run(outcome["status"], False, seconds,
               error_line=last_error_line(outcome.get("stderr", "")))


def _skip(reason: str):
    raise NotImplementedError(f"skipped: {reason}")


class EndingCase:
    """`streamtap_ending.name`, `.ending` (the catalog row), `.run(client)` -> Verdict."""

    def __init__(self, fixture: StreamtapFixture, ending: CatalogRow, *, dialect: str | None = None,
                 once: bool = False, timeout_s: float = DEFAULT_TIMEOUT_S, skip=None):
        self.fixture = fixture
        self.ending = ending
        self.dialect = dialect
        self.once = once
        self.timeout_s = timeout_s
        self.verdict: Verdict | None = None
        self.skip = skip or _skip  # pytest.skip in the plugin
        self._seen: set[str] = set()

    @property
    def name(self) -> str:
        return self.ending.name

    def _call(self, client, ending: CatalogRow | None) -> tuple[Run, list]:
        return observe(self.fixture, ending, self.once, self._seen,
                       lambda: call_client(client, self.timeout_s))

    def run(self, client) -> Verdict:
        """Call `client()` (a function that makes one request through the proxy, as the code
        under test does) once on a complete stream, which must succeed, then under this
        ending; return the verdict. A broken expectation (or a failed first call) raises
        ProbeFailure; an ending that does not apply to the client's dialect, or whose fault is
        not built yet, calls `skip` with the reason."""
        run, records = self._call(client, None)
        try:
            dialect = baseline_dialect(run, [spoken_dialect(record) for record in records],
                                       first_request(records), self.dialect, self.timeout_s)
        except BaselineError as exc:
            raise ProbeFailure(str(exc)) from None
        reason = Catalog().skip_reason(self.ending, dialect)
        if reason:
            self.skip(reason)
        run, _ = self._call(client, self.ending)
        self.verdict = judge(self.ending, run)
        self.dialect = dialect
        if not self.verdict.meets:
            raise ProbeFailure(f"{self.name}: the client was graded {self.verdict.grade} "
                               f"({self.verdict.why}); its error: {run.error_line or 'none'}")
        return self.verdict
