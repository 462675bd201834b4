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
        started = time.monotonic()
        while time.monotonic() - started < START_TIMEOUT_S:
            if self.process.poll() is not None:
                raise RuntimeError(f"phoenix exited with {self.process.returncode}:\n"
                                   f"{self.log()[-3000:]}")
            try:
                if httpx.get(self.url + "/healthz", timeout=2).status_code == 200:
                    return time.monotonic() - started
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"phoenix did not answer within {START_TIMEOUT_S} s:\n"
                           f"{self.log()[-3000:]}")

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
