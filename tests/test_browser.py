"""The live page and the report in real headless Chromium, through the DevTools protocol: one
timeline per trace, the failure marker on failed ones only, a row added live when a request
finishes, a provider error message of `<script>...` shown as text (no script ran), and the
`streamtap stats` tables (what the client saw too) of the traces shown."""

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cdp import Browser, chromium_path
from tests.fakeprovider import Scenario
from tests.programs import found_or_skip
from tests.proxyproc import ProxyProcess, new_session
from tests.streams import chat_text_stream, sse
from tests.tracefixtures import HOSTILE_MESSAGE, HOSTILE_MESSAGE_KEPT, build

# Every test here starts a process or a server (tests/README.md).
pytestmark = pytest.mark.e2e

DOM_FACTS = """(() => {
  const sections = [...document.querySelectorAll("section.trace")];
  return {
    title: document.title,
    sections: sections.map(s => s.dataset.traceId),
    perTrace: sections.map(s => s.querySelectorAll("svg.timeline").length),
    failed: sections.filter(s => s.querySelector(".failure-marker")).map(s => s.dataset.traceId),
    rows: [...document.querySelectorAll("#rows tr")].map(r => r.dataset.traceId),
    failedRows: [...document.querySelectorAll("#rows tr.failed")].map(r => r.dataset.traceId),
    messages: [...document.querySelectorAll(".error-line")].map(e => e.textContent),
    planted: document.querySelectorAll("section.trace script, section.trace img, #rows script").length,
    stats: [...document.querySelectorAll("table.stats")].map(
      t => [...t.rows].map(r => [...r.cells].map(c => c.textContent))),
  };
})()"""


def stats_tables(trace_dir: Path) -> list[list[list[str]]]:
    """The tables `streamtap stats --format md` prints for the trace dir, as cells."""
    result = subprocess.run([sys.executable, "-m", "streamtap", "stats", "--trace-dir",
                             str(trace_dir), "--format", "md"], capture_output=True, text=True,
                            timeout=60, env={**os.environ, "NO_COLOR": "1"}, check=True)
    tables: list[list[list[str]]] = []
    for block in result.stdout.split("\n\n"):
        rows = [line[2:-2].split(" | ") for line in block.splitlines()
                if line.startswith("| ") and not line.startswith("| ---")]
        if rows:
            tables.append(rows)
    return tables


@pytest.fixture(scope="module")
def chromium():
    return found_or_skip(chromium_path(), "chromium", "chromium", "the browser tests")


def check_fixture_page(facts: dict, records: list[dict]) -> None:
    ids = [record["trace_id"] for record in records]
    assert sorted(facts["sections"]) == sorted(ids)
    assert facts["perTrace"] == [1] * len(ids)  # one timeline per trace
    failed = sorted(record["trace_id"] for record in records if not record["outcome"]["ok"])
    assert sorted(facts["failed"]) == failed and sorted(facts["failedRows"]) == failed
    assert sum(HOSTILE_MESSAGE_KEPT in text for text in facts["messages"]) == 2  # HTTP 429 + in-stream
    assert facts["planted"] == 0 and "pwned" not in facts["title"]


async def test_live_page_shows_every_trace_and_adds_a_row_live(chromium, fake, tmp_path):
    records = build(tmp_path / "traces")
    proxy = ProxyProcess(tmp_path, {"fake": fake.url}, trace_dir=tmp_path / "traces")
    try:
        async with Browser(chromium) as browser:
            await browser.open(proxy.url() + "/_streamtap/")
            facts = await browser.evaluate(DOM_FACTS)
            assert facts["title"] == "streamtap: live"
            check_fixture_page(facts, records)
            tables = stats_tables(tmp_path / "traces")
            assert facts["stats"] == tables and len(tables) == 3
            assert tables[0][1][:3] == ["openai", "9", "1 (11.1%)"]
            # what the client saw: error, in_band_error, silent_truncation, hang, success
            assert tables[1] == [["ROUTE", "CLIENT SEES ERROR", "CLIENT SEES IN_BAND_ERROR",
                                  "CLIENT SEES SILENT_TRUNCATION", "CLIENT SEES HANG",
                                  "CLIENT SEES SUCCESS"],
                                 ["openai", "5 (55.6%)", "1 (11.1%)", "1 (11.1%)", "1 (11.1%)",
                                  "1 (11.1%)"]]
            await browser.wait_for("document.querySelectorAll('#rows tr').length === 9")

            hostile = fake.add(Scenario(chat_text_stream(2, done=False)[:-1] + [
                sse({"error": {"type": "server_error", "message": HOSTILE_MESSAGE}})]))
            session = new_session()
            await asyncio.to_thread(_post, proxy, hostile, session)
            await browser.wait_for("document.querySelectorAll('section.trace').length === 10")
            facts = await browser.evaluate(DOM_FACTS)
            new_id = proxy.record(session)["trace_id"]
            assert facts["rows"][0] == new_id and new_id in facts["failedRows"]
            assert facts["sections"][0] == new_id and new_id in facts["failed"]
            assert facts["perTrace"] == [1] * 10
            assert await browser.evaluate("document.getElementById('count').textContent") == "10"
            assert sum(HOSTILE_MESSAGE_KEPT in text for text in facts["messages"]) == 3
            assert facts["planted"] == 0 and facts["title"] == "streamtap: live"

            await browser.evaluate("document.getElementById('only-failed').click()")
            hidden = await browser.evaluate(
                "[...document.querySelectorAll('#rows tr.hidden')].map(r => r.dataset.ok)")
            assert hidden == ["true"]
            await browser.screenshot(tmp_path / "live-page.png")
            assert (tmp_path / "live-page.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    finally:
        proxy.stop()


def _post(proxy, prefix: str, session: str, fault: str | None = None) -> None:
    import httpx

    headers = {"x-streamtap-session": session}
    if fault:
        headers["x-streamtap-fault"] = fault
    httpx.post(proxy.url("fake") + prefix + "/v1/chat/completions",
               json={"model": "gpt-live", "stream": True}, headers=headers, timeout=10)


SHOWN_WHEN_FAILED_ONLY = """(() => {
  document.getElementById("only-failed").click();
  const shown = s => [...document.querySelectorAll(s + ":not(.hidden)")].map(e => e.dataset.traceId);
  return {rows: shown("#rows tr"), sections: shown("section.trace")};
})()"""


async def test_failures_only_keeps_what_ls_failed_lists(chromium, fake, tmp_path):
    """An ok request whose client hung (the connection stayed open after [DONE]) is listed by
    `ls --failed`, so "failures only" keeps its row and section: in rows added live from the
    event feed, and in rows the page was rendered with."""
    from streamtap.proxy.readout.commands import failed_trace_ids

    build(tmp_path / "traces")
    proxy = ProxyProcess(tmp_path, {"fake": fake.url}, trace_dir=tmp_path / "traces")
    complete = fake.add(Scenario(chat_text_stream(2)))
    try:
        async with Browser(chromium) as browser:
            await browser.open(proxy.url() + "/_streamtap/")
            session = new_session()
            await asyncio.to_thread(_post, proxy, complete, session, "hold; duration_ms=1200")
            await asyncio.to_thread(_post, proxy, complete, session)
            hung, whole = proxy.records(session, 2)
            assert (hung["outcome"]["ok"], hung["outcome"]["client_sees"]) == (True, "hang")
            assert (whole["outcome"]["ok"], whole["outcome"]["client_sees"]) == (True, "success")
            listed = failed_trace_ids(tmp_path / "traces")
            assert hung["trace_id"] in listed and whole["trace_id"] not in listed
            await browser.wait_for("document.querySelectorAll('section.trace').length === 11")
            live = await browser.evaluate(SHOWN_WHEN_FAILED_ONLY)
            assert sorted(live["rows"]) == sorted(live["sections"]) == sorted(listed)
            await browser.open(proxy.url() + "/_streamtap/")  # the same rows, rendered
            rendered = await browser.evaluate(SHOWN_WHEN_FAILED_ONLY)
            assert sorted(rendered["rows"]) == sorted(rendered["sections"]) == sorted(listed)
    finally:
        proxy.stop()


async def test_report_opens_offline_with_the_same_views(chromium, tmp_path):
    records = build(tmp_path / "traces")
    from streamtap.proxy.readout.pages import report

    out = tmp_path / "report.html"
    assert report(tmp_path / "traces", out) == 0
    html = out.read_text()
    assert "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "https://" not in html.replace("https://api.openai.com:443", "")
    async with Browser(chromium) as browser:
        await browser.open(Path(out).as_uri())
        facts = await browser.evaluate(DOM_FACTS)
        check_fixture_page(facts, records)
        assert facts["stats"] == stats_tables(tmp_path / "traces")
        assert facts["stats"][0][0][-2:] == ["CLEAN CLOSE, NO TERMINAL", "TERMINAL AFTER ERROR"]
        await browser.evaluate("document.getElementById('only-failed').click()")
        visible = await browser.evaluate(
            "[...document.querySelectorAll('section.trace:not(.hidden)')].length")
        assert visible == len([r for r in records if not r["outcome"]["ok"]])
