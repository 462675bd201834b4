"""What streamtap costs per frame, side by side with a direct connection, a naive aiohttp
pass-through, nginx and mitmproxy, in one run.

    python bench/run.py [--quick] [--out bench/results/latest.json] [--only streamtap,nginx]
    python bench/run.py --quick --workloads a --suspects    # each stall suspect on and off
    python bench/run.py --ci                                # a gross-regression gate, ~30 s

Starts the paced fake SSE upstream (bench/upstream.py), then for each row (direct, naive,
streamtap, streamtap+otlp, nginx, mitmproxy) and each workload starts a fresh proxy, warms it up,
and runs the load generator (bench/client.py) in its own process:

  (a) 200 concurrent streams x 200 frames of ~300 bytes at 50 frames/s each
  (b) one unpaced stream of 100,000 frames of ~300 bytes
  (c) 1,000 concurrent streams at 1 frame/s for 30 s
  (d) one unpaced stream of 1,000,000 small (~120-byte) frames

`--quick` runs a smaller version of each (about a minute in all). `--suspects` adds a row per
suspect of streamtap's own event-loop stalls switched on or off (bench/variant.py), with the
collector's pauses and the loop lag each record measured. `--ci` runs (a) small for direct, the
raw relay and streamtap, prints streamtap's figures as ratios to the raw relay of the same run,
and exits 3 only on a gross regression (CI_GATES). A row whose proxy is not
installed says `skipped: <why>`. It prints one table and writes it, with every raw figure, as
JSON. bench/README.md says what each number means. Standard library only; every process it
starts is stopped on exit, Ctrl-C or error.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from variant import VARIANTS  # bench/variant.py, beside this script

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE_KIB = os.sysconf("SC_PAGE_SIZE") // 1024
LISTENING = re.compile(rb"listening on http://127\.0\.0\.1:(\d+)")

# name, streams, frames per stream, frames/s per stream (0 = unpaced), frame size, options
FULL = {
    "a": dict(streams=200, frames=200, rate=50, size=300, stamps=True),
    "b": dict(streams=1, frames=100_000, rate=0, size=300),
    "c": dict(streams=1000, frames=30, rate=1, size=300, stamps=True, rss="open"),
    "d": dict(streams=1, frames=1_000_000, rate=0, size=100, rss="long"),
}
QUICK = {
    "a": dict(streams=100, frames=100, rate=50, size=300, stamps=True),
    "b": dict(streams=1, frames=50_000, rate=0, size=300),
    "c": dict(streams=300, frames=5, rate=1, size=300, stamps=True, rss="open"),
    "d": dict(streams=1, frames=100_000, rate=0, size=100, rss="long"),
}
# --ci: (a) only, small enough for a test run on a busy machine; the direct and raw rows of the
# same run are the yardsticks, so the gates are ratios, not absolute figures.
CI = {"a": dict(streams=40, frames=100, rate=50, size=300, stamps=True)}
CI_ROWS = ("direct", "raw", "streamtap")
# (figure, what it is, the most streamtap may have, as a multiple of the raw relay's, the floor
# of the raw relay's figure). Only gross regressions fail: a loaded machine moves the ratios.
CI_GATES = (
    ("a_cpu_us_per_frame", "(a) CPU per frame (us)", 8.0, 1.0),
    ("a_added_p99_ms", "(a) added latency p99 (ms)", 40.0, 1.0),
)
WARMUP = dict(streams=2, frames=20, rate=0, size=300)
ROWS = ("direct", "raw", "naive", "streamtap", "streamtap+otlp", "nginx", "mitmproxy")
SUSPECT_PREFIX = "streamtap/"  # `streamtap/gc-off`: a row of bench/variant.py's variants


class Stop(Exception):
    """SIGTERM: unwind like Ctrl-C so every process gets stopped."""


# -- processes ------------------------------------------------------------------------------------
def _die_with_parent() -> None:
    """In the child before exec: get SIGTERM if this runner dies, even by SIGKILL (Linux)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class Processes:
    """Every process this run started, each in its own session so a signal reaches its children."""

    def __init__(self) -> None:
        self.running: list[subprocess.Popen] = []

    def start(self, cmd: list[str], log: Path, cwd: Path | None = None,
              env: dict | None = None) -> subprocess.Popen:
        with open(log, "ab") as out:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, cwd=cwd, env=env,
                                    start_new_session=True, preexec_fn=_die_with_parent)
        self.running.append(proc)
        return proc

    def stop(self, proc: subprocess.Popen, grace: float = 5.0) -> None:
        if proc.poll() is None:
            for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
                try:
                    os.killpg(proc.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    proc.wait(wait)
                    break
                except subprocess.TimeoutExpired:
                    continue
        # The group may outlive its leader (nginx workers): make sure nothing of it is left.
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        if proc in self.running:
            self.running.remove(proc)

    def stop_all(self) -> None:
        for proc in reversed(list(self.running)):
            self.stop(proc, grace=3.0)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(proc: subprocess.Popen, log: Path, port: int | None,
                   timeout: float = 30.0) -> int:
    """The port the process listens on: parsed from its `listening on` line, or `port` once it
    accepts a connection."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = log.read_bytes()[-2000:].decode(errors="replace")
            raise RuntimeError(f"exited with {proc.returncode} before listening:\n{tail}")
        if port is None:
            found = LISTENING.search(log.read_bytes())
            if found:
                return int(found.group(1))
        else:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    return port
            except OSError:
                pass
        time.sleep(0.05)
    raise RuntimeError(f"not listening after {timeout:g} s")


def process_tree(root: int) -> list[int]:
    """`root` and all its descendants (nginx workers, ...)."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(b")") + 2:].split()[1])
        parents.setdefault(ppid, []).append(int(entry))
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo.extend(parents.get(pid, ()))
    return tree


def cpu_times(pids: list[int]) -> tuple[float, float]:
    """(user, system) CPU seconds of the processes (all their threads), from /proc/<pid>/stat."""
    user = system = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        user += int(fields[11])  # utime, field 14 of proc_pid_stat(5)
        system += int(fields[12])  # stime, field 15
    return user / CLK_TCK, system / CLK_TCK


def cpu_seconds(pids: list[int]) -> float:
    return sum(cpu_times(pids))


def rss_mib(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/statm", "rb") as f:
                total += int(f.read().split()[1]) * PAGE_KIB
        except OSError:
            pass
    return total / 1024


# -- the proxies ----------------------------------------------------------------------------------
@dataclass
class Target:
    name: str
    port: int
    proc: subprocess.Popen | None = None
    pids: list[int] = field(default_factory=list)
    trace_dir: Path | None = None
    stats: Path | None = None  # bench/variant.py's collector figures, written at exit


class Bench:
    def __init__(self, args: argparse.Namespace, work: Path, procs: Processes):
        self.args = args
        self.work = work
        self.procs = procs
        self.python = sys.executable
        self.upstream_port = 0
        self.upstream_pid = 0
        self.nginx = args.nginx or shutil.which("nginx") or (
            "/usr/sbin/nginx" if os.access("/usr/sbin/nginx", os.X_OK) else None)
        mitm = args.mitmdump or os.environ.get("MITMDUMP") or shutil.which("mitmdump")
        if not mitm and os.access("/tmp/mitmvenv/bin/mitmdump", os.X_OK):
            mitm = "/tmp/mitmvenv/bin/mitmdump"
        self.mitmdump = mitm
        self.counter = 0
        self.sink_url = ""

    def log(self, name: str) -> Path:
        self.counter += 1
        return self.work / f"{self.counter:02d}-{name.replace('/', '-')}.log"

    def start_upstream(self) -> None:
        log = self.log("upstream")
        proc = self.procs.start([self.python, str(BENCH / "upstream.py"), "--port", "0"], log)
        self.upstream_port = wait_listening(proc, log, None)
        self.upstream_pid = proc.pid

    def otlp_sink(self) -> str:
        """bench/otlp_bench.py's discarding OTLP receiver, started once, in its own process (so
        its CPU is not counted as the proxy's)."""
        if not self.sink_url:
            log = self.log("otlp-sink")
            proc = self.procs.start([self.python, str(BENCH / "otlp_bench.py"), "--sink"], log)
            self.sink_url = f"http://127.0.0.1:{wait_listening(proc, log, None)}"
        return self.sink_url

    def otlp_done(self, target: Target, records: int, timeout: float = 120.0) -> dict:
        """The exporter's health once every record was exported or dropped (or at timeout)."""
        deadline = time.monotonic() + timeout
        while True:
            with urllib.request.urlopen(f"http://127.0.0.1:{target.port}/_streamtap/health",
                                        timeout=10) as answer:
                otlp = json.loads(answer.read())["otlp"]
            done = otlp["exported"] + otlp["dropped"] + otlp["unmappable"]
            if done >= records or time.monotonic() > deadline:
                return otlp
            time.sleep(0.1)

    def skip_reason(self, name: str) -> str | None:
        if name == "nginx" and not self.nginx:
            return "nginx not installed (e.g. `apt-get install -y nginx`)"
        if name == "mitmproxy" and not self.mitmdump:
            return ("mitmdump not found (e.g. `python3 -m venv /tmp/mitmvenv && "
                    "/tmp/mitmvenv/bin/pip install mitmproxy`, or pass --mitmdump PATH)")
        if name == "streamtap+otlp":
            probe = subprocess.run([self.python, "-c", "import opentelemetry.sdk.trace"],
                                   capture_output=True, text=True, timeout=60)
            if probe.returncode != 0:
                return "the OpenTelemetry SDK is missing (pip install 'streamtap[otel]')"
        if name.startswith(SUSPECT_PREFIX) and name[len(SUSPECT_PREFIX):] not in VARIANTS:
            return f"no such variant; bench/variant.py has {', '.join(VARIANTS)}"
        if name.startswith("streamtap"):
            probe = subprocess.run([self.python, "-c", "import streamtap.proxy.serve"], cwd=ROOT,
                                   capture_output=True, text=True, timeout=60)
            if probe.returncode != 0:
                return f"cannot import streamtap with {self.python}: {probe.stderr.strip()[-300:]}"
        if name in ("naive", "raw"):
            probe = subprocess.run([self.python, "-c", "import aiohttp, uvloop"],
                                   capture_output=True, timeout=60)
            if probe.returncode != 0:
                return f"aiohttp or uvloop is not importable with {self.python}"
        return None

    def start(self, name: str) -> Target:
        upstream = f"http://127.0.0.1:{self.upstream_port}"
        log = self.log(name)
        if name == "direct":
            return Target(name, self.upstream_port)
        if name == "raw":
            proc = self.procs.start([self.python, str(BENCH / "raw_relay.py"), "--upstream",
                                     upstream, "--port", "0"], log)
            port = wait_listening(proc, log, None)
            return Target(name, port, proc)
        if name == "naive":
            proc = self.procs.start([self.python, str(BENCH / "naive_proxy.py"), "--upstream",
                                     upstream, "--port", "0", "--loop", self.args.naive_loop],
                                    log)
            port = wait_listening(proc, log, None)
            return Target(name, port, proc)
        if name.startswith("streamtap"):
            trace_dir = Path(tempfile.mkdtemp(prefix="traces-", dir=self.work))
            export = []
            if name == "streamtap+otlp":  # every record also as a span, to a discarding receiver
                export = ["--otlp-endpoint", self.otlp_sink()]
            launch, stats = [self.python, "-m", "streamtap"], None
            if name.startswith(SUSPECT_PREFIX):
                stats = log.with_suffix(".gc.json")
                launch = [self.python, str(BENCH / "variant.py"), "--variant",
                          name[len(SUSPECT_PREFIX):], "--stats", str(stats), "--"]
            proc = self.procs.start([*launch, "serve", "--port", "0",
                                     "--trace-dir", str(trace_dir), "--route",
                                     f"bench={upstream}", "--log-format", "json", *export], log,
                                    cwd=ROOT)
            port = wait_listening(proc, log, None)
            return Target(name, port, proc, trace_dir=trace_dir, stats=stats)
        if name == "nginx":
            port = free_port()
            prefix = Path(tempfile.mkdtemp(prefix="nginx-", dir=self.work))
            conf = prefix / "nginx.conf"
            conf.write_text(NGINX_CONF.format(prefix=prefix, port=port,
                                              upstream=self.upstream_port))
            proc = self.procs.start([self.nginx, "-p", str(prefix), "-c", str(conf),
                                     "-e", str(prefix / "error.log"), "-g", "daemon off;"], log)
            wait_listening(proc, log, port)
            return Target(name, port, proc)
        if name == "mitmproxy":
            port = free_port()
            confdir = Path(tempfile.mkdtemp(prefix="mitm-", dir=self.work))
            proc = self.procs.start([self.mitmdump, "--mode", f"reverse:{upstream}",
                                     "--listen-host", "127.0.0.1", "--listen-port", str(port),
                                     "--set", f"confdir={confdir}",
                                     "--set", "stream_large_bodies=1",
                                     "--set", "flow_detail=0", "--quiet"], log)
            wait_listening(proc, log, port, timeout=60)
            return Target(name, port, proc)
        raise ValueError(name)

    def client(self, target: Target, spec: dict, pids: list[int], label: str) -> dict:
        cmd = [self.python, str(BENCH / "client.py"), "--port", str(target.port),
               "--streams", str(spec["streams"]), "--frames", str(spec["frames"]),
               "--rate", str(spec["rate"]), "--size", str(spec["size"])]
        if target.name == "direct":
            cmd += ["--path", "/v1/chat/completions"]
        if spec.get("stamps"):
            cmd.append("--stamps")
        if spec.get("rss") and pids:
            cmd += ["--rss-pids", ",".join(map(str, pids)), "--rss-mode", spec["rss"]]
        expected = ((spec["frames"] / spec["rate"] if spec["rate"] else 0) + spec["streams"] / 50
                    + spec["streams"] * spec["frames"] / 20_000)
        timeout = self.args.timeout_scale * (expected * 3 + 120)
        cmd += ["--timeout", f"{timeout:.0f}"]
        log = self.log(f"client-{target.name}-{label}")
        proc = self.procs.start(cmd, log)
        try:
            proc.wait(timeout + 30)
        except subprocess.TimeoutExpired:
            self.procs.stop(proc)
            raise RuntimeError(f"client did not stop within {timeout + 30:.0f} s") from None
        self.procs.stop(proc)
        text = log.read_text(errors="replace").strip().splitlines()
        try:
            return json.loads(text[-1])
        except (IndexError, ValueError):
            raise RuntimeError("client printed no result: " + "\n".join(text[-5:])) from None

    def workload(self, name: str, label: str, spec: dict) -> dict:
        target = self.start(name)
        result = None
        try:
            warm = self.client(target, WARMUP, [], f"{label}-warmup")
            if warm["failed"]:
                raise RuntimeError(f"warm-up failed: {warm['errors']}")
            time.sleep(0.3)
            pids = process_tree(target.proc.pid) if target.proc else []
            up_pids = [self.upstream_pid]
            (user0, sys0), up0, t0 = cpu_times(pids), cpu_seconds(up_pids), time.perf_counter()
            cpu0 = user0 + sys0
            load0 = os.getloadavg()[0]
            result = self.client(target, spec, pids, label)
            time.sleep(0.3)  # let a recorder's writer thread finish the last records
            if target.name == "streamtap+otlp":  # count the export's CPU too: wait for it
                result["otlp"] = self.otlp_done(target, spec["streams"] + WARMUP["streams"])
            wall = time.perf_counter() - t0
            (user1, sys1), up1 = cpu_times(pids), cpu_seconds(up_pids)
            cpu1 = user1 + sys1
            if pids:
                result["proxy_cpu_user_s"] = round(user1 - user0, 3)
                result["proxy_cpu_sys_s"] = round(sys1 - sys0, 3)
            result["proxy_cpu_s"] = round(cpu1 - cpu0, 3) if pids else None
            # CPU% over the client's own window (its connections open to its last byte)
            result["proxy_cpu_pct"] = (round(100 * (cpu1 - cpu0) / max(result["wall_s"], 1e-9),
                                             1) if pids else None)
            result["proxy_rss_mib_after"] = round(rss_mib(pids), 1) if pids else None
            result["proxy_processes"] = len(pids)
            result["upstream_cpu_pct"] = round(100 * (up1 - up0) / max(result["wall_s"], 1e-9), 1)
            result["measure_window_s"] = round(wall, 3)
            result["client_cpu_pct"] = round(100 * result["cpu_s"] / max(result["wall_s"], 1e-9),
                                             1)
            result["loadavg_1m"] = [round(load0, 2), round(os.getloadavg()[0], 2)]
            if pids and result["frames"]:
                result["proxy_cpu_us_per_frame"] = round(
                    (cpu1 - cpu0) * 1e6 / result["frames"], 2)
            if target.trace_dir is not None:
                records = list(target.trace_dir.glob("*/*.json"))
                result["records_written"] = len(records)
                result["records_expected"] = spec["streams"] + WARMUP["streams"]
                if records and label == "a":
                    sample = json.loads(records[-1].read_text())
                    result["record_sample"] = {
                        "dialect": sample.get("dialect"),
                        "frame_count": (sample.get("stream") or {}).get("frame_count"),
                        "outcome": (sample.get("outcome") or {}).get("summary")}
                result["proxy_lag_ms"] = recorded_lag(records)
            return result
        finally:
            if target.proc is not None:
                self.procs.stop(target.proc)
            # Written when the proxy exits: the collector's pauses over warm-up and workload.
            if result is not None and target.stats is not None and target.stats.exists():
                stats = json.loads(target.stats.read_text())
                result["gc"], result["store_thread"] = stats["gc"], stats["store_thread"]


def recorded_lag(records: list[Path]) -> dict | None:
    """The event-loop lag streamtap measured in itself, over the records of a run: the worst
    per stream (`timeline.proxy_lag_max_ms`), as percentiles over the streams."""
    lags = []
    for path in records:
        lag = (json.loads(path.read_text()).get("timeline") or {}).get("proxy_lag_max_ms")
        if lag is not None:
            lags.append(lag)
    if not lags:
        return None
    lags.sort()
    return {"streams": len(lags), "p50_ms": lags[len(lags) // 2],
            "p99_ms": lags[min(len(lags) - 1, int(0.99 * len(lags)))], "max_ms": lags[-1]}


NGINX_CONF = """\
# Written by bench/run.py for one workload; removed afterwards.
user root;
worker_processes 1;
worker_rlimit_nofile 16384;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log warn;
events {{ worker_connections 8192; }}
http {{
    access_log off;
    client_body_temp_path {prefix}/client_body;
    proxy_temp_path {prefix}/proxy_temp;
    upstream bench {{ server 127.0.0.1:{upstream}; keepalive 256; }}
    server {{
        listen 127.0.0.1:{port} backlog=4096;
        location / {{
            proxy_pass http://bench;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
            proxy_request_buffering off;
            proxy_read_timeout 600s;
        }}
    }}
}}
"""


# -- the table ------------------------------------------------------------------------------------
def ratio(value, base) -> float | None:
    if value is None or not base:
        return None
    return round(value / base, 2)


def summarize(rows: dict) -> dict:
    """The table's figures, per row, from the raw client/proxy results."""
    def get(row, wl, *keys):
        value = rows.get(row, {}).get("workloads", {}).get(wl)
        for key in keys:
            if not isinstance(value, dict):
                return None
            value = value.get(key)
        return value

    base_cpu = {ref: get(ref, "a", "proxy_cpu_us_per_frame")
                for ref in ("nginx", "mitmproxy", "naive", "raw")}
    d50, d99 = get("direct", "a", "latency", "p50_ms"), get("direct", "a", "latency", "p99_ms")
    table = {}
    for name, row in rows.items():
        if row.get("skipped"):
            table[name] = {"skipped": row["skipped"]}
            continue
        s: dict = {}
        cpu = get(name, "a", "proxy_cpu_us_per_frame")
        s["a_cpu_us_per_frame"] = cpu
        s["a_x_nginx"] = ratio(cpu, base_cpu["nginx"])
        s["a_x_mitmproxy"] = ratio(cpu, base_cpu["mitmproxy"])
        s["a_x_naive"] = ratio(cpu, base_cpu["naive"])
        s["a_x_raw"] = ratio(cpu, base_cpu["raw"])
        s["a_proxy_cpu_pct"] = get(name, "a", "proxy_cpu_pct")
        s["a_frames_per_read"] = get(name, "a", "frames_per_read")
        p50, p99 = get(name, "a", "latency", "p50_ms"), get(name, "a", "latency", "p99_ms")
        s["a_latency_p50_ms"], s["a_latency_p99_ms"] = p50, p99
        if name != "direct" and p50 is not None and d50 is not None:
            s["a_added_p50_ms"] = round(p50 - d50, 3)
            s["a_added_p99_ms"] = round(p99 - d99, 3)
        q50, q99 = (get(name, "a", "latency_steady", "p50_ms"),
                    get(name, "a", "latency_steady", "p99_ms"))
        b50, b99 = (get("direct", "a", "latency_steady", "p50_ms"),
                    get("direct", "a", "latency_steady", "p99_ms"))
        if name != "direct" and q50 is not None and b50 is not None:
            s["a_added_steady_p50_ms"] = round(q50 - b50, 3)
            s["a_added_steady_p99_ms"] = round(q99 - b99, 3)
        s.update(stall_figures(rows, name))
        span, b_bytes, b_frames = (get(name, "b", "stream_s_max"), get(name, "b", "bytes"),
                                   get(name, "b", "frames"))
        if span:
            s["b_mb_per_s"] = round(b_bytes / span / 1e6, 1)
            s["b_frames_per_s"] = round(b_frames / span)
        s["b_cpu_us_per_frame"] = get(name, "b", "proxy_cpu_us_per_frame")
        rss = get(name, "c", "rss_kib")
        streams = get(name, "c", "streams")
        if rss and rss.get("open_last") is not None and rss.get("before") is not None:
            s["c_rss_kib_per_stream"] = round((rss["open_last"] - rss["before"]) / streams, 1)
            s["c_rss_mib_before"] = round(rss["before"] / 1024, 1)
            s["c_rss_mib_open"] = round(rss["open_last"] / 1024, 1)
        s["c_cpu_us_per_frame"] = get(name, "c", "proxy_cpu_us_per_frame")
        rss = get(name, "d", "rss_kib")
        if rss and rss.get("start") is not None and rss.get("end") is not None:
            s["d_rss_mib_start"] = round(rss["start"] / 1024, 1)
            s["d_rss_mib_end"] = round(rss["end"] / 1024, 1)
            s["d_rss_growth_mib"] = round((rss["end"] - rss["start"]) / 1024, 1)
        s["d_cpu_us_per_frame"] = get(name, "d", "proxy_cpu_us_per_frame")
        span = get(name, "d", "stream_s_max")
        if span:
            s["d_frames_per_s"] = round(get(name, "d", "frames") / span)
        s["client_cpu_pct_max"] = max((w.get("client_cpu_pct") or 0) for w in
                                      row.get("workloads", {}).values() if isinstance(w, dict)
                                      ) if row.get("workloads") else None
        s["failures"] = {wl: w["error"] for wl, w in row.get("workloads", {}).items()
                         if isinstance(w, dict) and w.get("error")}
        table[name] = s
    return table


def stall_figures(rows: dict, name: str) -> dict:
    """Where (a)'s latency tail comes from: the loop lag the records measured, the collector's
    pauses (suspect rows only), and the share of frames delivered more than 1, 5 and 20 ms
    after they were sent."""
    res = rows.get(name, {}).get("workloads", {}).get("a")
    if not isinstance(res, dict):
        return {}
    out = {}
    lag = res.get("proxy_lag_ms") or {}
    out["a_lag_p99_ms"], out["a_lag_max_ms"] = lag.get("p99_ms"), lag.get("max_ms")
    gc_stats = res.get("gc")
    if gc_stats:
        pauses = [p for gen in gc_stats.values() for p in gen["longest_ms"]]
        out["a_gc_collections"] = sum(gen["count"] for gen in gc_stats.values())
        out["a_gc_over_1ms"] = sum(gen["over_1ms"] for gen in gc_stats.values())
        out["a_gc_max_ms"] = max(pauses, default=0.0)
        out["a_gc_total_ms"] = round(sum(gen["total_ms"] for gen in gc_stats.values()), 1)
    store = res.get("store_thread")
    if store:  # the longest the store thread ran Python for one part of one record
        out["a_store_max_ms"] = max(part["max_ms"] for part in store.values())
    hist = res.get("latency_histogram")
    if hist:
        total = sum(hist.values()) or 1
        labels = list(hist)
        for edge in (1, 5, 20):
            above = labels[labels.index(f"<={edge:g}") + 1:]
            out[f"a_share_over_{edge}ms"] = round(100 * sum(hist[k] for k in above) / total, 2)
    return out


def fmt(value, spec: str = ".1f", width: int = 8) -> str:
    if value is None:
        return "-".rjust(width)
    return format(value, spec).rjust(width)


def warnings(rows: dict) -> list[str]:
    """Runs whose figures need a caveat: a busy client, a saturated proxy."""
    out = []
    for name, row in rows.items():
        for wl, res in (row.get("workloads") or {}).items():
            if not isinstance(res, dict) or res.get("error"):
                continue
            client, proxy = res.get("client_cpu_pct") or 0, res.get("proxy_cpu_pct") or 0
            if client >= 80:
                out.append(f"{name} ({wl}): the client used {client:.0f}% of a core; this "
                           "figure may be the client's limit, not the proxy's")
            if proxy >= 90:
                out.append(f"{name} ({wl}): the proxy used {proxy:.0f}% of a core (saturated): "
                           "reads coalesce frames, so CPU per frame reads low and latency high")
    return out


def render(table: dict, specs: dict, quick: bool) -> str:
    a, b, c, d = specs["a"], specs["b"], specs["c"], specs["d"]
    lines = []
    if quick:
        lines.append("QUICK RUN (--quick): smaller workloads than the issue's; figures are "
                     "indicative only.")
    lines.append(
        f"(a) {a['streams']} streams x {a['frames']} frames of ~{a['size']} B at {a['rate']}/s | "
        f"(b) 1 unpaced stream, {b['frames']:,} frames | (c) {c['streams']} streams at "
        f"{c['rate']}/s for {c['frames']} s | (d) 1 stream of {d['frames']:,} ~120 B frames")
    head = (f"{'':14} {'(a) CPU':>8} {'x':>6} {'x':>6} {'x':>6} {'proxy':>6} {'+lat':>7} "
            f"{'+lat':>7} {'x':>6} | {'(b)':>6} {'(b)':>8} | {'(c) RSS':>8} | {'(d) RSS':>8} {'(d) RSS':>8}")
    head2 = (f"{'row':14} {'us/frm':>8} {'nginx':>6} {'mitm':>6} {'naive':>6} {'CPU%':>6} "
             f"{'p50 ms':>7} {'p99 ms':>7} {'raw':>6} | {'MB/s':>6} {'frames/s':>8} | {'KiB/strm':>8} | "
             f"{'start MiB':>8} {'end MiB':>8}")
    lines += [head, head2, "-" * len(head2)]
    for name, s in table.items():
        if name.startswith(SUSPECT_PREFIX):
            continue  # the stall table shows them
        if "skipped" in s:
            lines.append(f"{name:14} skipped: {s['skipped']}")
            continue
        if name == "direct":
            p50 = f"({s['a_latency_p50_ms']:.2f})" if s.get("a_latency_p50_ms") is not None \
                else "-"
            p99 = f"({s['a_latency_p99_ms']:.2f})" if s.get("a_latency_p99_ms") is not None \
                else "-"
        else:
            p50, p99 = fmt(s.get("a_added_p50_ms"), ".2f", 7), fmt(s.get("a_added_p99_ms"),
                                                                  ".2f", 7)
        lines.append(
            f"{name:14} {fmt(s.get('a_cpu_us_per_frame'))} {fmt(s.get('a_x_nginx'), '.2f', 6)} "
            f"{fmt(s.get('a_x_mitmproxy'), '.2f', 6)} {fmt(s.get('a_x_naive'), '.2f', 6)} "
            f"{fmt(s.get('a_proxy_cpu_pct'), '.0f', 6)} {p50:>7} {p99:>7} "
            f"{fmt(s.get('a_x_raw'), '.2f', 6)} | "
            f"{fmt(s.get('b_mb_per_s'), '.1f', 6)} {fmt(s.get('b_frames_per_s'), ',.0f')} | "
            f"{fmt(s.get('c_rss_kib_per_stream'))} | {fmt(s.get('d_rss_mib_start'))} "
            f"{fmt(s.get('d_rss_mib_end'))}")
        for wl, error in s.get("failures", {}).items():
            lines.append(f"{'':14} ({wl}) FAILED: {error}")
    lines.append("direct row: absolute delivery latency in (); other rows: latency added over "
                 "direct (difference of percentiles).")
    lines.append("")
    head = (f"{'detail':14} {'(a) steady +lat':>16} {'(a)':>6} {'(b) CPU':>8} {'(c) CPU':>8} "
            f"{'(d) CPU':>8} {'(d)':>9} {'(c) RSS MiB':>14} {'client':>7}")
    head2 = (f"{'row':14} {'p50 ms':>8}{'p99 ms':>8} {'frm/rd':>6} {'us/frm':>8} {'us/frm':>8} "
             f"{'us/frm':>8} {'frames/s':>9} {'before->open':>14} {'CPU%':>7}")
    lines += [head, head2, "-" * len(head2)]
    for name, s in table.items():
        if "skipped" in s or name.startswith(SUSPECT_PREFIX):
            continue
        rss = (f"{s['c_rss_mib_before']:.1f}->{s['c_rss_mib_open']:.1f}"
               if s.get("c_rss_mib_open") is not None else "-")
        lines.append(
            f"{name:14} {fmt(s.get('a_added_steady_p50_ms'), '.2f')}"
            f"{fmt(s.get('a_added_steady_p99_ms'), '.2f')} "
            f"{fmt(s.get('a_frames_per_read'), '.2f', 6)} {fmt(s.get('b_cpu_us_per_frame'))} "
            f"{fmt(s.get('c_cpu_us_per_frame'))} {fmt(s.get('d_cpu_us_per_frame'))} "
            f"{fmt(s.get('d_frames_per_s'), ',.0f', 9)} {rss:>14} "
            f"{fmt(s.get('client_cpu_pct_max'), '.0f', 7)}")
    lines.append("steady: frames in the middle 80% of each stream of (a), away from the other "
                 "streams' starts and ends. frm/rd: frames per client socket read in (a); well "
                 "above the direct row's means the proxy batched frames (it fell behind), which "
                 "lowers its CPU per frame and raises latency.")
    lines += ["", *render_stalls(table)]
    return "\n".join(lines)


def render_stalls(table: dict) -> list[str]:
    """(a)'s latency tail and its suspects, per row: frames delivered late, the loop lag the
    records measured, the collector's pauses and the store thread's longest run of Python for
    one record (rows of bench/variant.py)."""
    head = (f"{'stalls (a)':24} {'(a) CPU':>7} {'added ms':>15} {'steady':>7} | "
            f"{'% frames later than':>20} | {'loop lag ms':>13} | {'gc pauses':>20} | "
            f"{'store':>7}")
    head2 = (f"{'row':24} {'us/frm':>7} {'p50':>7} {'p99':>7} {'p99':>7} | {'1 ms':>6} "
             f"{'5 ms':>6} {'20 ms':>6} | {'p99':>6} {'max':>6} | {'count':>6} {'>1ms':>5} "
             f"{'max ms':>7} | {'max ms':>7}")
    lines = [head, head2, "-" * len(head2)]
    for name, s in table.items():
        if "skipped" in s:
            continue
        lines.append(
            f"{name:24} {fmt(s.get('a_cpu_us_per_frame'), '.1f', 7)} "
            f"{fmt(s.get('a_added_p50_ms'), '.2f', 7)} {fmt(s.get('a_added_p99_ms'), '.2f', 7)} "
            f"{fmt(s.get('a_added_steady_p99_ms'), '.2f', 7)} | "
            f"{fmt(s.get('a_share_over_1ms'), '.2f', 6)} "
            f"{fmt(s.get('a_share_over_5ms'), '.2f', 6)} {fmt(s.get('a_share_over_20ms'), '.2f', 6)}"
            f" | {fmt(s.get('a_lag_p99_ms'), '.1f', 6)} {fmt(s.get('a_lag_max_ms'), '.1f', 6)} | "
            f"{fmt(s.get('a_gc_collections'), 'd', 6)} {fmt(s.get('a_gc_over_1ms'), 'd', 5)} "
            f"{fmt(s.get('a_gc_max_ms'), '.1f', 7)} | {fmt(s.get('a_store_max_ms'), '.1f', 7)}")
    lines.append("added, steady: as in the tables above. "
                 "% frames later than: of (a)'s frames, delivered that long after the upstream "
                 "sent them (the direct row is the floor). loop lag: the worst lag per stream "
                 "each record measured in streamtap itself (timeline.proxy_lag_max_ms). gc: "
                 "collections timed with gc.callbacks; store: the store thread's longest CPU "
                 "time for one part of one record (finish, write, log line and feed), time the "
                 "event loop may wait for the GIL (suspect rows, bench/variant.py).")
    return lines


def targets(table: dict) -> list[str]:
    s = table.get("streamtap")
    if not s or "skipped" in s:
        return ["streamtap row missing: no target checked"]
    at_most, at_least = "<=", ">="
    checks = [
        ("(a) CPU/frame", "naive aiohttp pass-through", s.get("a_x_naive"), at_most, 1.0),
        ("(a) CPU/frame", "1.5x nginx", s.get("a_x_nginx"), at_most, 1.5),
        ("(a) CPU/frame", "0.3x mitmproxy", s.get("a_x_mitmproxy"), at_most, 0.3),
        ("(a) added latency p50", "0.2 ms", s.get("a_added_p50_ms"), at_most, 0.2),
        ("(a) added latency p99", "2 ms", s.get("a_added_p99_ms"), at_most, 2.0),
        ("(b) one unpaced stream", "500 MB/s", s.get("b_mb_per_s"), at_least, 500.0),
        ("(c) RSS per open stream", "64 KiB", s.get("c_rss_kib_per_stream"), at_most, 64.0),
        ("(d) RSS growth over the stream", "10 MiB", s.get("d_rss_growth_mib"), at_most, 10.0),
        # issue 25, timing you can trust: the proxy adds no stalls of its own
        ("(a) steady added latency p99", "1 ms", s.get("a_added_steady_p99_ms"), at_most, 1.0),
        ("(a) added latency p99", "3 ms", s.get("a_added_p99_ms"), at_most, 3.0),
        ("(a) added latency p50", "0.3 ms", s.get("a_added_p50_ms"), at_most, 0.3),
        ("(a) CPU/frame", "2.0x nginx", s.get("a_x_nginx"), at_most, 2.0),
        ("(b) one unpaced stream", "150 MB/s", s.get("b_mb_per_s"), at_least, 150.0),
    ]
    out = []
    for what, target, value, sense, limit in checks:
        label = f"{what} {sense} {target}"
        if value is None:
            out.append(f"  n/a   {label}: not measured")
        elif (value <= limit) if sense == at_most else (value >= limit):
            out.append(f"  met   {label}: {value:g}")
        else:
            out.append(f"  MISSED {label}: {value:g} ({value / limit:.2f}x the target)")
    return out


def ci_gate(table: dict) -> tuple[list[str], bool]:
    """streamtap's (a) figures as ratios to the raw relay of the same run, and whether any
    passed its gross-regression gate (CI_GATES)."""
    s, raw = table.get("streamtap") or {}, table.get("raw") or {}
    lines, ok = [], True
    for key, label, most, floor in CI_GATES:
        value, base = s.get(key), raw.get(key)
        if value is None or base is None:
            lines.append(f"  FAILED {label}: not measured (see the failures above)")
            ok = False
            continue
        times = value / max(base, floor)
        verdict = "ok    " if times <= most else "FAILED"
        ok = ok and times <= most
        lines.append(f"  {verdict} {label}: streamtap {value:g}, raw relay {base:g}: "
                     f"{times:.2f}x (gate: at most {most:g}x)")
    return lines, ok


# -- main -----------------------------------------------------------------------------------------
def tool_version(cmd: list[str]) -> str | None:
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = (done.stdout + done.stderr).strip().splitlines()
    return text[0].strip() if text else None


def machine() -> dict:
    model = None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = None
    try:
        mem = int(Path("/proc/meminfo").read_text().split()[1]) // 1024
    except (OSError, ValueError, IndexError):
        pass
    return {"platform": platform.platform(), "cpu": model, "cpus": os.cpu_count(),
            "mem_mib": mem, "python": platform.python_version()}


def git_rev() -> str | None:
    rev = tool_version(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"])
    dirty = tool_version(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no",
                          "--", "proxy", "diagnostics"])
    return f"{rev}{' + uncommitted changes' if dirty else ''}" if rev else None


def measure(bench: Bench, rows_wanted: list[str], wls: list[str], specs: dict) -> dict:
    """Run each workload for each row, printing progress; the raw results per row."""
    rows: dict = {}
    for name in rows_wanted:
        reason = bench.skip_reason(name)
        if reason:
            print(f"{name}: skipped: {reason}", flush=True)
            rows[name] = {"skipped": reason}
            continue
        row = rows[name] = {"workloads": {}}
        # A suspect row is for the stall table, which is (a)'s.
        for wl in ([w for w in wls if w == "a"] if name.startswith(SUSPECT_PREFIX) else wls):
            t = time.perf_counter()
            print(f"{name} ({wl}) ...", end=" ", flush=True)
            try:
                res = bench.workload(name, wl, specs[wl])
                if res.get("failed"):
                    res["error"] = f"{res['failed']} streams failed: {res.get('errors')}"
                row["workloads"][wl] = res
                print(f"{time.perf_counter() - t:.1f} s, {res['frames']:,} frames, "
                      f"proxy CPU {res.get('proxy_cpu_pct')}%, client CPU "
                      f"{res.get('client_cpu_pct')}%"
                      + (f"  FAILED: {res['error']}" if res.get("error") else ""),
                      flush=True)
            except RuntimeError as exc:
                row["workloads"][wl] = {"error": str(exc)[:2000]}
                print(f"FAILED: {str(exc)[:500]}", flush=True)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="about a minute: smaller workloads")
    parser.add_argument("--out", help="where the JSON goes (default bench/results/latest.json; "
                                      "with --ci, nowhere)")
    parser.add_argument("--ci", action="store_true",
                        help="(a) small, for direct, raw and streamtap: ratios to the raw relay, "
                             "exit 3 on a gross regression")
    parser.add_argument("--suspects", nargs="?", const=",".join(VARIANTS), default="",
                        help="add a row per event-loop stall suspect of bench/variant.py "
                             f"(default all: {','.join(VARIANTS)})")
    parser.add_argument("--only", default=",".join(ROWS),
                        help=f"rows to run, comma-separated (default {','.join(ROWS)}); "
                             "direct always runs (the latency baseline)")
    parser.add_argument("--workloads", default="abcd", help="which of a b c d to run")
    parser.add_argument("--nginx", help="nginx binary (default: from PATH)")
    parser.add_argument("--mitmdump", help="mitmdump binary (default: $MITMDUMP, PATH, "
                                           "/tmp/mitmvenv/bin/mitmdump)")
    parser.add_argument("--naive-loop", choices=("uvloop", "asyncio"), default="uvloop",
                        help="event loop of the naive yardstick (streamtap uses uvloop)")
    parser.add_argument("--keep", action="store_true", help="keep logs and traces (printed)")
    parser.add_argument("--timeout-scale", type=float, default=1.0)
    args = parser.parse_args()
    rows_wanted = ["direct"] + [r for r in ROWS[1:] if r in args.only.split(",")]
    rows_wanted += [SUSPECT_PREFIX + v for v in args.suspects.split(",") if v]
    specs = QUICK if args.quick else FULL
    wls = [w for w in "abcd" if w in args.workloads]
    if args.ci:
        rows_wanted, specs, wls = list(CI_ROWS), CI, ["a"]
    if args.out is None and not args.ci:
        args.out = str(BENCH / "results" / "latest.json")

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < min(hard, 16384):
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 16384), hard))

    def on_term(signum, frame):
        raise Stop()

    def on_int(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    # Explicitly, since a shell starts background jobs with SIGINT ignored.
    signal.signal(signal.SIGINT, on_int)
    work = Path(tempfile.mkdtemp(prefix="streamtap-bench-"))
    procs = Processes()
    bench = Bench(args, work, procs)
    rows: dict = {}
    started = time.time()
    code = 0
    try:
        print(f"streamtap benchmark{' (QUICK: smaller workloads)' if args.quick else ''}; "
              f"work dir {work}", flush=True)
        bench.start_upstream()
        print(f"upstream on 127.0.0.1:{bench.upstream_port}", flush=True)
        rows = measure(bench, rows_wanted, wls, specs)
        table = summarize(rows)
        gates, passed = ci_gate(table) if args.ci else ([], True)
        if not passed:  # a busy machine's one-off stall is not a regression: confirm it
            print("a CI gate failed: measuring once more", flush=True)
            rows = measure(bench, rows_wanted, wls, specs)
            table = summarize(rows)
            gates, passed = ci_gate(table)
        text = render(table, {w: specs.get(w) or QUICK[w] for w in "abcd"}, args.quick)
        notes = warnings(rows)
        if notes:
            text += "\n\nnotes:\n" + "\n".join(f"  {line}" for line in notes)
        checks = targets(table)
        print()
        print(text)
        if args.ci:
            print("\nCI: streamtap against the raw relay of this run (gross regressions only):")
            print("\n".join(gates))
            checks += gates
            code = 0 if passed else 3
        else:
            print("\nstreamtap against the issue's targets (same run):")
            print("\n".join(checks))
        result = {
            "generated_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "command": " ".join(["python", "bench/run.py", *sys.argv[1:]]),
            "quick": args.quick,
            "duration_s": round(time.time() - started, 1),
            "machine": machine(),
            "versions": {
                "streamtap": git_rev(),
                "python_libs": tool_version([sys.executable, "-c", "import aiohttp, uvloop; "
                                             "print('aiohttp', aiohttp.__version__, 'uvloop', "
                                             "uvloop.__version__)"]),
                "nginx": tool_version([bench.nginx, "-v"]) if bench.nginx else None,
                "mitmdump": tool_version([bench.mitmdump, "--version"])
                if bench.mitmdump else None,
            },
            "naive_loop": args.naive_loop,
            "workloads": {w: specs[w] for w in wls},
            "table": table,
            "targets": checks,
            "text": text,
            "raw": rows,
        }
        if args.out:
            out = Path(args.out)
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(result, indent=1) + "\n")
            print(f"\nwrote {out}")
    except (KeyboardInterrupt, Stop):
        print("\ninterrupted: stopping every process started", file=sys.stderr)
        code = 130
    finally:
        procs.stop_all()
        if args.keep:
            print(f"logs and traces kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
