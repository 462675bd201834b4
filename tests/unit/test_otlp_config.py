"""`[export.otlp]`, `--otlp-endpoint` and the standard OTEL_EXPORTER_OTLP_* variables."""

from __future__ import annotations

import pytest

from streamtap.proxy.cli import build_parser, config_from_args
from streamtap.proxy.config import ConfigError, OtlpExport, from_mapping, otlp_from_env


def serve_config(monkeypatch, tmp_path, toml: str | None, *flags: str, env: dict | None = None):
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                 "OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TIMEOUT", "OTEL_SDK_DISABLED",
                 "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_BSP_MAX_QUEUE_SIZE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in (env or {}).items():
        monkeypatch.setenv(name, value)
    args = ["serve"]
    if toml is not None:
        path = tmp_path / "c.toml"
        path.write_text(toml)
        args += ["--config", str(path)]
    return config_from_args(build_parser().parse_args([*args, *flags])).export.otlp


def test_defaults_are_off_with_the_documented_limits():
    otlp = OtlpExport()
    assert otlp.url == "" and otlp.protocol == "http/protobuf"
    assert (otlp.batch_size, otlp.queue_limit, otlp.timeout_ms, otlp.frame_events) == \
        (256, 2048, 10_000, 200)
    assert otlp.project_attribute == "openinference.project.name"


def test_the_flag_is_a_base_url_and_wins_over_file_and_env(monkeypatch, tmp_path):
    otlp = serve_config(monkeypatch, tmp_path, '[export.otlp]\nendpoint = "http://file:4318"\n'
                        'batch_size = 10\n', "--otlp-endpoint", "http://flag:6006/",
                        env={"OTEL_EXPORTER_OTLP_ENDPOINT": "http://env:4318"})
    assert otlp.url == "http://flag:6006/v1/traces" and otlp.batch_size == 10


def test_env_fills_in_what_the_file_does_not_say(monkeypatch, tmp_path):
    otlp = serve_config(monkeypatch, tmp_path, '[export.otlp]\nproject = "team"\n', env={
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://cloud.example/api/public/otel/v1/traces",
        "OTEL_EXPORTER_OTLP_HEADERS": "Authorization=Basic%20abc,x-team=a",
        "OTEL_EXPORTER_OTLP_TIMEOUT": "2500", "OTEL_BSP_MAX_QUEUE_SIZE": "99"})
    assert otlp.url == "https://cloud.example/api/public/otel/v1/traces"
    assert otlp.headers == (("Authorization", "Basic abc"), ("x-team", "a"))
    assert (otlp.timeout_ms, otlp.queue_limit, otlp.project) == (2500, 99, "team")
    assert "abc" not in repr(otlp)  # a key in headers never shows in a repr or a log line


def test_the_file_wins_over_env(monkeypatch, tmp_path):
    otlp = serve_config(monkeypatch, tmp_path, '[export.otlp]\nendpoint = "http://file:4318"\n',
                        env={"OTEL_EXPORTER_OTLP_ENDPOINT": "http://env:4318"})
    assert otlp.url == "http://file:4318/v1/traces"


def test_the_files_base_url_beats_a_full_url_from_env(monkeypatch, tmp_path):
    otlp = serve_config(monkeypatch, tmp_path, '[export.otlp]\nendpoint = "http://file:4318"\n',
                        env={"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://env:4318/v1/traces"})
    assert otlp.url == "http://file:4318/v1/traces"


def test_otel_sdk_disabled_turns_export_off(monkeypatch, tmp_path):
    assert serve_config(monkeypatch, tmp_path, None, env={
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://env:4318", "OTEL_SDK_DISABLED": "true"}).url == ""


@pytest.mark.parametrize("table, key, words", [
    ({"export": {"otlp": {"endpiont": "http://x"}}}, "export.otlp.endpiont",
     "did you mean `export.otlp.endpoint`?"),
    ({"export": {"otel": {}}}, "export.otel", "did you mean `export.otlp`?"),
    ({"export": {"otlp": {"protocol": "grpc"}}}, "export.otlp.protocol",
     "only http/protobuf is supported"),
    ({"export": {"otlp": {"queue_limit": 0}}}, "export.otlp.queue_limit", "must be 1 or more"),
    ({"export": {"otlp": {"endpoint": "localhost:4318"}}}, "export.otlp.endpoint",
     "expected an http(s) URL"),
    ({"export": {"otlp": {"headers": {"authorization": 5}}}}, "export.otlp.headers.authorization",
     "expected a string"),
])
def test_bad_export_options_name_the_key(table, key, words):
    with pytest.raises(ConfigError) as caught:
        from_mapping(table)
    assert caught.value.key == key and words in str(caught.value)


def test_bad_env_values_name_the_variable():
    with pytest.raises(ConfigError, match="OTEL_EXPORTER_OTLP_TIMEOUT.*expected milliseconds"):
        otlp_from_env({"OTEL_EXPORTER_OTLP_TIMEOUT": "10s"})
    with pytest.raises(ConfigError, match="OTEL_EXPORTER_OTLP_HEADERS.*name=value"):
        otlp_from_env({"OTEL_EXPORTER_OTLP_HEADERS": "justakey"})
