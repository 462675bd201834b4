"""docs/otlp-and-metrics.md's "Metrics" section: its commands run verbatim (the serve commands on
their default ports when those are free on this shared machine), and its PromQL is what
tests/test_prometheus_e2e.py asks a real Prometheus."""

from __future__ import annotations

import shlex
import shutil
import signal
import subprocess

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.otlpsink import OtlpSink
from tests.readme import code_blocks, shell_blocks
from tests.test_lifecycle import read_lines
from tests.support import port_free
from tests.test_readme_team_scale import shell_env

TITLE = "Metrics"


def test_the_section_shows_exactly_these_commands():
    assert [" ".join(line.split()[:3]) for line in shell_blocks(TITLE)] == [
        "streamtap serve --metrics-listen", "curl -s http://127.0.0.1:8787/_streamtap/metrics",
        "curl -s http://127.0.0.1:9464/metrics",
        "OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental streamtap serve"]
    assert len(code_blocks(TITLE, "promql")[0].splitlines()) == 3


def start(command: str, tmp_path, until: str) -> tuple[subprocess.Popen, str]:
    env = shell_env()
    words = shlex.split(command)
    while "=" in words[0]:  # VAR=value prefixes, as the shell reads them
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    words[0] = shutil.which(words[0], path=env["PATH"])
    process = subprocess.Popen(words, cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    return process, read_lines(process.stdout, until, timeout=30)


def stop(process: subprocess.Popen) -> int:
    process.send_signal(signal.SIGTERM)
    return process.wait(30)


@pytest.mark.e2e
def test_serve_with_the_listener_and_both_curls_run_verbatim(tmp_path):
    if not (port_free(8787) and port_free(9464)):
        pytest.skip("port 8787 or 9464 (the commands' ports) is in use on this machine")
    serve, local, listener, _ = shell_blocks(TITLE)
    process, banner = start(serve, tmp_path, "metrics:")
    try:
        listen = serve.split("--metrics-listen ")[1].split()[0]
        assert f"metrics: http://{listen}/metrics serves the metrics and nothing else" in banner
        proxy_url = local.split()[-1].removesuffix("/_streamtap/metrics")
        # One request to count: to a route that does not exist, so no upstream is needed.
        assert httpx.get(proxy_url + "/nosuch/v1/models", timeout=30).status_code == 404
        answers = []
        for command in (local, listener):
            result = subprocess.run(command, shell=True, capture_output=True, text=True,
                                    timeout=30)
            assert result.returncode == 0, result.stderr
            answers.append(result.stdout)
    finally:
        assert stop(process) == 0
    for text in answers:
        counted = [sample for family in text_string_to_metric_families(text)
                   for sample in family.samples if sample.name == "streamtap_requests_total"]
        assert [(s.labels["route"], s.labels["boundary"], s.value) for s in counted] == \
            [("nosuch", "proxy", 1.0)]


@pytest.mark.e2e
def test_the_opt_in_command_runs_verbatim_and_says_which_names(tmp_path):
    if not (port_free(8787) and port_free(4318)):
        pytest.skip("port 8787 or 4318 (the command's ports) is in use on this machine")
    sink = OtlpSink(4318).start()
    try:
        process, banner = start(shell_blocks(TITLE)[-1], tmp_path, "otlp: GenAI names")
        assert stop(process) == 0
    finally:
        sink.stop()
    assert "otlp: every record also goes as a span to http://127.0.0.1:4318/v1/traces" in banner
    assert ("otlp: GenAI names of the semantic-conventions-genai repository "
            "(OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental)") in banner
