"""The bench scripts the README's figures come from still run: frame_costs.py names every part it
measures, the raw relay relays, forced_exit.py counts a forced exit's records (the figures
themselves are for a quiet machine, not a test)."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import threading

from tests.proxyproc import REPO

PARTS = ("chunked de-framing", "SSE decoding", "dialect", "shape", "recorder, all",
         "record per request")


def test_frame_costs_prints_a_positive_cost_for_every_part():
    result = subprocess.run([sys.executable, str(REPO / "bench" / "frame_costs.py"), "--frames",
                             "400", "--repeat", "1"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    rows = {line[:22].strip(): line[22:].split() for line in result.stdout.splitlines()[1:]
            if line[:22].strip() in PARTS}
    assert set(rows) == set(PARTS)
    for part, figures in rows.items():
        single, bulk = map(float, figures)
        assert single > 0 and bulk > 0, (part, figures)


def test_the_raw_relay_row_passes_bytes_both_ways_untouched():
    """bench/raw_relay.py, the floor every benchmark run compares streamtap with, really relays."""
    upstream = socket.socket()
    upstream.bind(("127.0.0.1", 0))
    upstream.listen(1)
    answer = b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\nconnection: close\r\n\r\nhello"
    seen = []

    def serve() -> None:
        conn, _ = upstream.accept()
        with conn:
            request = b""
            while b"\r\n\r\n" not in request:
                request += conn.recv(65536)
            seen.append(request)
            conn.sendall(answer)

    threading.Thread(target=serve, daemon=True).start()
    relay = subprocess.Popen([sys.executable, str(REPO / "bench" / "raw_relay.py"), "--upstream",
                              f"http://127.0.0.1:{upstream.getsockname()[1]}"],
                             stdout=subprocess.PIPE, text=True)
    try:
        port = int(re.search(r":(\d+)$", relay.stdout.readline().strip()).group(1))
        request = b"GET /x HTTP/1.1\r\nHost: a\r\n\r\n"
        with socket.create_connection(("127.0.0.1", port), timeout=10) as client:
            client.sendall(request)
            received = b""
            while data := client.recv(65536):
                received += data
    finally:
        relay.terminate()
        relay.wait(10)
        upstream.close()
    assert seen == [request] and received == answer


def test_forced_exit_counts_every_stream_it_opened_in_the_records():
    result = subprocess.run([sys.executable, str(REPO / "bench" / "forced_exit.py"), "--streams",
                             "40", "--timeout", "60"], capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stdout + result.stderr
    figures = json.loads(result.stdout)
    assert (figures["streams"], figures["not_reading"], figures["exit_status"]) == (40, 20, 0)
    assert figures["records_written"] == figures["records_expected"] == 40
    assert figures["evidence"] == {"shutdown_forced": 40}  # both signals at once: all forced
    assert 0 < figures["exit_s"] < 10


def test_the_stats_bench_times_stats_over_index_lines_streamtap_writes():
    """bench/stats_bench.py (the README's `stats` figure) runs small: each row names its line
    count and a positive time."""
    result = subprocess.run([sys.executable, str(REPO / "bench" / "stats_bench.py"), "--lines",
                             "2000", "--repeat", "1"], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    rows = result.stdout.splitlines()
    assert len(rows) == 2 and all("over 2,000 index lines: " in row for row in rows)
    for row in rows:
        assert float(re.search(r"lines: (\d+\.\d+) s wall, (\d+\.\d+) s CPU", row).group(1)) > 0, row


def test_the_stats_bench_writes_lines_stats_reads_on_its_fast_path(tmp_path):
    """The figure is of the path today's index lines take (no JSON parse), with rare endings."""
    sys.path.insert(0, str(REPO / "bench"))
    try:
        from stats_bench import write_index
    finally:
        sys.path.remove(str(REPO / "bench"))
    from streamtap.diagnostics.views.stats import Tally
    from streamtap.proxy.readout.stats import tally_listing
    from streamtap.proxy.readout.traces import read_index

    write_index(tmp_path, 2000)
    listing = read_index(tmp_path)
    read = Tally("model").reader.read
    assert len(listing.entries) == 2000
    assert all(isinstance(read(raw)[0], bytes) for _, raw, _, _ in listing.entries)
    total = tally_listing(listing, "route").total
    assert 0 < total.endings["clean_close_no_terminal"] < total.requests - total.completed
    assert total.endings["terminal_after_error"] >= 2
    # what the client saw is on every line, so the figure includes counting it
    assert "unknown" not in total.client_sees and total.client_sees["silent_truncation"] > 0
