"""Arize Phoenix as a real subprocess for the OTLP end-to-end test: started from its own cached
venv (made by `.ci/phoenix-venv`) on free loopback ports with a throw-away working dir, stopped by
its PID."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import httpx

PHOENIX_VENV = Path(os.environ.get("STREAMTAP_PHOENIX_VENV",
                                   Path.home() / ".cache" / "streamtap-ci" / "phoenix-venv"))
PHOENIX_BIN = PHOENIX_VENV / "bin" / "phoenix"
START_TIMEOUT_S = 300  # about 90 s on a loaded 2-core machine: migrations, then the web app


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until_up(server, name: str, url: str, timeout_s: float, every_s: float) -> float:
    """Seconds until `url` answers 200; a server (with .process, .log(), .stop()) that exits or
    stays silent past `timeout_s` is stopped and raised with the end of its log."""
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        if server.process.poll() is not None:
            raise RuntimeError(f"{name} exited with {server.process.returncode}:\n"
                               f"{server.log()[-3000:]}")
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return time.monotonic() - started
        except httpx.HTTPError:
            pass
        time.sleep(every_s)
    server.stop()
    raise RuntimeError(f"{name} did not answer within {timeout_s} s:\n{server.log()[-3000:]}")


class PhoenixProcess:
    def __init__(self, workdir: Path):
        self.workdir = workdir
        self.port = free_port()
        self.log_path = workdir / "phoenix.log"
        env = {**os.environ,
               "PHOENIX_HOST": "127.0.0.1", "PHOENIX_PORT": str(self.port),
               # Phoenix binds its gRPC receiver on every interface whatever PHOENIX_HOST says;
               # a free port keeps it off anything else, and the test stops it at the end.
               "PHOENIX_GRPC_PORT": str(free_port()),
               "PHOENIX_WORKING_DIR": str(workdir / "phoenix-data"),
               "PHOENIX_TELEMETRY_ENABLED": "false", "DO_NOT_TRACK": "1"}
        env = {k: v for k, v in env.items() if not k.startswith("OTEL_")}
        self._log = open(self.log_path, "wb")
        self.process = subprocess.Popen([str(PHOENIX_BIN), "serve"], cwd=workdir, env=env,
                                        stdout=self._log, stderr=subprocess.STDOUT)
        self.started_in_s = self._wait_up()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _wait_up(self) -> float:
        return wait_until_up(self, "phoenix", self.url + "/healthz", START_TIMEOUT_S, 0.5)

    def spans(self, project: str) -> list[dict]:
        """Every span of a project, through Phoenix's REST API (following the cursor)."""
        spans, cursor = [], None
        while True:
            params = {"limit": 100, **({"cursor": cursor} if cursor else {})}
            response = httpx.get(f"{self.url}/v1/projects/{project}/spans", params=params,
                                 timeout=10)
            if response.status_code == 404:  # the project exists once its first span landed
                return []
            response.raise_for_status()
            body = response.json()
            spans += body["data"]
            cursor = body.get("next_cursor")
            if not cursor:
                return spans

    def log(self) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()
