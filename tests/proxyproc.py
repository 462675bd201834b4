"""Runs `streamtap serve` as a real subprocess for the end-to-end tests, and reads its records."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
_LISTENING = re.compile(r"listening on http://127\.0\.0\.1:(\d+)")


class StreamtapProcess:
    """A `streamtap` command as a real subprocess, started once its banner says where it listens
    (and, with `ready`, once a banner line starts with that text)."""

    def __init__(self, workdir: Path, args: list[str], name: str, ready: str | None = None):
        self.workdir = workdir
        self.stderr_path = workdir / f"{name}-{uuid.uuid4().hex[:6]}.log"
        self._stderr = open(self.stderr_path, "wb")
        env = {**os.environ}
        self.process = subprocess.Popen([sys.executable, "-m", "streamtap", *args], cwd=workdir,
                                        stdout=subprocess.PIPE, stderr=self._stderr, env=env)
        self.banner = ""
        self.port = 0
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            line = self.process.stdout.readline().decode()
            if not line:
                break
            self.banner += line
            match = _LISTENING.search(line)
            if match:
                self.port = int(match.group(1))
            if self.port and (ready is None or line.startswith(ready)):
                return
        self.stop()
        raise RuntimeError(f"streamtap {name} did not start: {self.banner}{self.log()}")

    def log(self) -> str:
        if not self._stderr.closed:
            self._stderr.flush()
        return self.stderr_path.read_text(errors="replace")

    def stop(self, signum: int = signal.SIGTERM, timeout: float = 15.0) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signum)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._stderr.close()
        return self.process.returncode


class ProxyProcess(StreamtapProcess):
    """`streamtap serve` with a trace dir of its own; reads the records it writes."""

    def __init__(self, workdir: Path, routes: dict[str, str], *extra: str,
                 trace_dir: Path | None = None, ready: str | None = None):
        self.trace_dir = trace_dir or workdir / "traces"
        args = ["serve", "--port", "0", "--trace-dir", str(self.trace_dir),
                "--log-format", "json", *extra]
        for name, url in routes.items():
            args += ["--route", f"{name}={url}"]
        super().__init__(workdir, args, "proxy", ready)

    def url(self, route: str = "") -> str:
        return f"http://127.0.0.1:{self.port}/{route}" if route else f"http://127.0.0.1:{self.port}"

    def records(self, session: str, count: int = 1, timeout: float = 10.0) -> list[dict]:
        """The session's records, oldest first, once `count` of them exist (written by a thread)."""
        folder = self.trace_dir / session
        deadline = time.monotonic() + timeout
        while True:
            files = sorted(folder.glob("*.json")) if folder.is_dir() else []
            if len(files) >= count or time.monotonic() > deadline:
                break
            time.sleep(0.02)
        if len(files) < count:
            raise AssertionError(f"expected {count} record(s) in {folder}, found {len(files)}\n"
                                 f"proxy log:\n{self.log()}")
        return [json.loads(path.read_text()) for path in files]

    def record(self, session: str) -> dict:
        return self.records(session, 1)[-1]


def new_session() -> str:
    return f"t-{uuid.uuid4().hex[:12]}"
