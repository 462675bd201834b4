"""A real Prometheus (Debian's `prometheus` package; `.ci/run` installs it) as a subprocess for the
metrics end-to-end test: its own config, throw-away storage and a free loopback port, a short
scrape interval, stopped by its PID; queried over its HTTP API."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import httpx

from tests.phoenixproc import free_port, wait_until_up

START_TIMEOUT_S = 60
SCRAPE_INTERVAL = "1s"


class PrometheusProcess:
    def __init__(self, binary: str, workdir: Path, target: str, metrics_path: str):
        self.port = free_port()
        config = workdir / "prometheus.yml"
        config.write_text(
            f"global:\n  scrape_interval: {SCRAPE_INTERVAL}\n  evaluation_interval: 1s\n"
            f"scrape_configs:\n  - job_name: streamtap\n    metrics_path: {metrics_path}\n"
            f"    static_configs:\n      - targets: ['{target}']\n")
        self.log_path = workdir / "prometheus.log"
        self._log = open(self.log_path, "wb")
        self.process = subprocess.Popen(
            [binary, f"--config.file={config}", f"--storage.tsdb.path={workdir / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{self.port}"],
            cwd=workdir, stdout=self._log, stderr=subprocess.STDOUT)
        self._wait_ready()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _wait_ready(self) -> None:
        wait_until_up(self, "prometheus", self.url + "/-/ready", START_TIMEOUT_S, 0.2)

    def query(self, promql: str) -> list[dict]:
        """An instant query's result vector: [{"metric": {labels}, "value": [time, "text"]}]."""
        response = httpx.get(self.url + "/api/v1/query", params={"query": promql}, timeout=10)
        body = response.json()
        assert body.get("status") == "success", body
        return body["data"]["result"]

    def wait_for(self, promql: str, predicate, timeout: float = 30.0) -> list[dict]:
        """Query until the answer satisfies `predicate` (scrapes come every second)."""
        deadline = time.monotonic() + timeout
        while True:
            result = self.query(promql)
            if predicate(result) or time.monotonic() > deadline:
                return result
            time.sleep(0.5)

    def targets(self) -> list[dict]:
        return httpx.get(self.url + "/api/v1/targets", timeout=10).json()["data"]["activeTargets"]

    def log(self) -> str:
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()
