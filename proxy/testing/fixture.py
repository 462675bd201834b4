"""What the `streamtap` pytest fixture hands a test: a Proxy in front of a FakeProvider (or the
real APIs), with helpers to arm faults, read records and assert where a stream broke."""

from __future__ import annotations

import os

from streamtap.proxy.config import DEFAULT_ROUTES
from streamtap.proxy.testing.api import FaultHandle, Proxy
from streamtap.proxy.testing.fake import FakeProvider
from streamtap.proxy.testing.records import Record

FAKE_KEYS = {"OPENAI_API_KEY": "sk-streamtap-fake", "ANTHROPIC_API_KEY": "sk-ant-streamtap-fake"}


class StreamtapFixture:
    """`streamtap.url("openai")`, `streamtap.fault(...)`, `streamtap.records()`,
    `streamtap.last_record()`, `streamtap.assert_break(boundary=..., phase=...)`; `.proxy` and
    `.fake` (None with a real upstream) are the Proxy and FakeProvider themselves."""

    def __init__(self, real: bool = False, fault=None, streams=(), samples=None, **options):
        self.real = real
        self.fake = None if real else FakeProvider(*streams, samples=samples)
        faults = fault if isinstance(fault, (list, tuple)) else [fault] if fault else []
        self._options = options
        self._faults = list(faults)
        self.proxy: Proxy | None = None

    def __enter__(self) -> "StreamtapFixture":
        routes = {}
        if self.fake is not None:
            self.fake.start()
            # every built-in route goes to the fake: a client may use any provider's base URL
            routes = {name: self.fake.url for name in DEFAULT_ROUTES}
        try:
            self.proxy = Proxy(routes=routes, faults=self._faults, **self._options).start()
        except BaseException:
            if self.fake is not None:
                self.fake.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        try:
            if self.proxy is not None:
                self.proxy.stop()
        finally:
            if self.fake is not None:
                self.fake.stop()

    def environment(self) -> dict[str, str]:
        """OPENAI_BASE_URL and ANTHROPIC_BASE_URL pointing at the proxy (with the fake
        upstream, placeholder API keys too when none are set, so SDK clients can be built)."""
        env = {"OPENAI_BASE_URL": self.url("openai") + "/v1",
               "ANTHROPIC_BASE_URL": self.url("anthropic")}
        if not self.real:
            env.update({name: value for name, value in FAKE_KEYS.items()
                        if not os.environ.get(name)})
        return env

    def url(self, route: str = "") -> str:
        """The proxy's URL for a route: the OpenAI SDK's base URL is `url("openai") + "/v1"`,
        Anthropic's `url("anthropic")`."""
        return self.proxy.url(route)

    def fault(self, spec: str | None = None, **fields) -> FaultHandle:
        """Arm a fault rule (the header's string form or keyword fields); see Proxy.fault."""
        return self.proxy.fault(spec, **fields)

    def records(self, session: str | None = None) -> list[Record]:
        return self.proxy.records(session=session)

    def last_record(self) -> Record:
        return self.proxy.last_record()

    def assert_break(self, boundary: str | None = None, phase: str | None = None,
                     evidence: str | None = None, record: Record | None = None) -> Record:
        """Assert how the last stream ended (boundary such as `injected`, `transport`,
        `provider_error`, `none`; phase such as `tool_input`, `text`, `complete`; one piece of
        evidence); the failure message quotes the record's summary."""
        record = record or self.last_record()
        outcome = record.outcome
        wrong = []
        if boundary is not None and outcome.boundary != boundary:
            wrong.append(f"boundary {outcome.boundary!r}, not {boundary!r}")
        if phase is not None and outcome.phase != phase:
            wrong.append(f"phase {outcome.phase!r}, not {phase!r}")
        if evidence is not None and evidence not in (outcome.evidence or []):
            wrong.append(f"evidence {list(outcome.evidence or [])}, without {evidence!r}")
        if wrong:
            raise AssertionError(f"the stream of {record.request.method} {record.request.path} "
                                 f"ended with {'; '.join(wrong)}: {record.summary}")
        return record

    def report_rows(self, test: str) -> list[tuple[str, ...]]:
        """One row per record: test, request, fault (fired or not), how the client's stream
        ended, boundary/phase."""
        rows = []
        for record in (self.proxy.records() if self.proxy else []):
            fault = record.fault
            fault_text = "-"
            if fault:
                fault_text = f"{fault.action} at {fault.at}" + (
                    "" if fault.fired else " (not fired)")
            rows.append((test, f"{record.route} {record.request.path or ''}", fault_text,
                         str(record.downstream.ended),
                         f"{record.outcome.boundary}/{record.outcome.phase}"))
        return rows


def render_report(rows: list[tuple[str, ...]]) -> list[str]:
    header = ("test", "request", "fault injected", "client stream", "boundary/phase")
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(header, widths)).rstrip(),
             "  ".join("-" * width for width in widths)]
    lines += ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip()
              for row in rows]
    return lines
