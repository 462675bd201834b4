"""`python bench/soak.py` runs, bounded, and prints figures that hold: as many records as requests
(and index lines), no unhandled exception, no canary in any record or log line. A short version
here; README gives the figures of a full run."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.readme import shell_blocks

# Every test here starts a process or a server (tests/README.md).
pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parent.parent


def figure(output: str, label: str) -> int:
    match = re.search(rf"^{label}: (\d+)", output, re.M)
    assert match, f"no `{label}` in the soak's output:\n{output}"
    return int(match.group(1))


def test_readmes_short_soak_prints_equal_requests_and_records_and_no_canary():
    [command] = shell_blocks("Hardening")
    assert command.startswith("python bench/soak.py")
    # Verbatim, with this interpreter first on PATH as `python`.
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(command, shell=True, capture_output=True, text=True, timeout=180,
                          cwd=REPO, env=env)
    output = done.stdout
    requests = figure(output, "requests")
    assert requests > 50, output + done.stderr  # the streams looped: more requests than streams
    assert figure(output, "records") == requests, output
    assert f"(index lines: {requests})" in output
    assert figure(output, "unhandled exceptions") == 0, output
    assert figure(output, "canaries found") == 0, output
    assert re.search(r"^rss MiB: start [\d.]+ middle [\d.]+ end [\d.]+", output, re.M), output
    assert "proxy exit status: 0" in output
    assert done.returncode == 0 and "FAILED" not in output, output
    # Every kind of stream ran: hostile ones and clients that never read included.
    for kind in ("endless", "huge_line", "slow_drip", "never_reads", "dialect+fault"):
        assert f'"{kind}"' in output, output


def test_the_accept_queue_holds_a_burst_of_new_streams(proxy):
    # With aiohttp's default of 128, a burst of connections overflowed it during the soak and
    # Linux reset requests the clients had already sent: no answer, no record.
    listening = subprocess.run(["ss", "-ltnH", f"sport = :{proxy.port}"], capture_output=True,
                               text=True, check=True).stdout.split()
    assert int(listening[2]) >= 1024, listening  # Send-Q of a listening socket: its backlog
