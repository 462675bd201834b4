"""Samples describe providers: streamtap's own answers are left out, and "identical" means the same
content-free structure and ending (the median timing is kept, the rest counted). The matrix reads
in a terminal."""

from __future__ import annotations

import json

import httpx

from streamtap.diagnostics.samples.dedupe import structure_key
from streamtap.diagnostics.samples.matrix import build_matrix
from streamtap.diagnostics.samples.matrix_table import render_table
from streamtap.proxy.cli import main
from streamtap.proxy.replay.sample_files import export_samples, load_samples
from tests.fakeprovider import Scenario
from tests.proxyproc import REPO, new_session
from tests.streams import chat_text_stream

CORPUS = REPO / "samples"


def test_requests_streamtap_refused_are_not_samples(fake, proxy, tmp_path):
    prefix = fake.add(Scenario(chat_text_stream(2)))
    session = new_session()
    headers = {"x-streamtap-session": session}
    url = proxy.url("fake") + prefix + "/v1/chat/completions"
    httpx.post(url, json={"stream": True}, headers=headers)  # a real answer
    httpx.post(url, json={"stream": True}, headers={**headers, "x-streamtap-fault": "reset; at=x"})
    httpx.post(proxy.url("nosuchroute") + "/v1/chat/completions", json={}, headers=headers)
    records = proxy.records(session, 3)
    assert sorted(r["outcome"]["boundary"] for r in records) == ["none", "proxy", "proxy"]
    summary = export_samples(proxy.trace_dir, tmp_path, session=session)
    assert len(summary.written) == 1 and summary.own_answers == 2
    [sample] = [json.loads(path.read_text()) for path in summary.written]
    assert sample["ending"] == "terminal"
    assert any("streamtap answered itself" in line for line in summary.lines())


def test_identical_requests_make_one_sample_with_the_median_timing(fake, proxy, tmp_path):
    session = new_session()
    delays = [0.0, 0.06, 0.02, 0.04, 0.08]  # five runs of one stream, timed differently
    for index, delay in enumerate(delays):
        # a different length of answer is the same kind of stream
        prefix = fake.add(Scenario(chat_text_stream(3 + index), delay_s=delay),
                          name=f"same-{session}")  # one path, as a client's retries have
        httpx.post(proxy.url("fake") + prefix + "/v1/chat/completions",
                   json={"model": "gpt-test", "stream": True},
                   headers={"x-streamtap-session": session}, timeout=10)
    records = proxy.records(session, len(delays))
    summary = export_samples(proxy.trace_dir, tmp_path, session=session)
    assert len(summary.written) == 1 and summary.duplicates == 4
    [sample] = [json.loads(path.read_text()) for path in summary.written]
    assert sample["also_seen"] == 4
    durations = sorted((r["timeline"]["upstream_end"] - r["timeline"]["response_headers"],
                        r["trace_id"]) for r in records)
    assert sample["source_trace_id"] == durations[2][1]  # the median, not the first
    # exported again into the same folder: nothing new
    again = export_samples(proxy.trace_dir, tmp_path, session=session)
    assert again.written == [] and again.duplicates == 5


def test_structure_ignores_timing_sizes_and_ids_but_not_the_ending():
    [sample] = [s for s in load_samples([CORPUS])[0]
                if s["provider"] == "openai" and s["dialect"] == "openai-chat"
                and s["ending"] == "terminal"][:1]
    other = json.loads(json.dumps(sample))
    other["source_trace_id"] = "ffff"
    other["timing"]["end_ms"] += 500
    other["frames"] = [[t * 2, size + 7, kind, shape] for t, size, kind, shape in
                       other["frames"]]
    other["headers"] = {name: "different" for name in other["headers"]}
    assert structure_key(other) == structure_key(sample)
    other["ending"] = "reset"
    assert structure_key(other) != structure_key(sample)


def test_matrix_default_is_a_terminal_table_no_wider_than_100(capsys):
    assert main(["samples", "matrix", str(CORPUS)]) == 0
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= 100
    assert "openrouter / openai-chat" in out and "|" not in out
    assert main(["samples", "matrix", str(CORPUS), "--format", "md"]) == 0
    assert capsys.readouterr().out.startswith("| provider | dialect |")
    samples, _ = load_samples([CORPUS])
    narrow = render_table(build_matrix(samples), width=60)
    assert max(len(line) for line in narrow.splitlines()) <= 60 + 30  # long tokens never split


def test_the_project_cites_public_sources_not_a_file_it_does_not_ship():
    missing = "PROTOCOLS" + ".md"  # spelled in two parts so this file does not name it
    shared = "/work/" + "shared"
    found = []
    for path in REPO.rglob("*"):
        if (path.is_file() and path.suffix in (".py", ".md", ".toml", ".json", ".txt", ".js")
                and not {".venv", ".git", "node_modules"} & set(path.relative_to(REPO).parts)):
            text = path.read_text(errors="replace")
            if missing in text or shared in text or "../" + "shared" in text:
                found.append(str(path.relative_to(REPO)))
    assert found == []
    sources = (CORPUS / "README.md").read_text().split("## Sources", 1)[1]
    assert sources.count("https://") >= 6
