"""bench/frame_costs.py runs and names every part it measures (the figures themselves are for a
quiet machine, not for a test)."""

from __future__ import annotations

import subprocess
import sys

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
