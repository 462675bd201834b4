"""Configuration: the documented defaults, TOML over defaults, flags over TOML, and an error that
names the key (and the nearest valid one) for anything unknown or bad, before the proxy listens."""

import socket
import subprocess
import sys

import httpx
import pytest

from streamtap.proxy.cli import build_parser, config_from_args
from streamtap.proxy.config import Config, ConfigError, Watchdog, load_file, make_route, parse_route_flag
from streamtap.proxy.serve.run import banner
from tests.fakeprovider import Scenario
from tests.proxyproc import ProxyProcess
from tests.streams import chat_text_stream

BUILTIN_ROUTES = {
    "openai": "https://api.openai.com",
    "anthropic": "https://api.anthropic.com",
    "gemini": "https://generativelanguage.googleapis.com",
    "openrouter": "https://openrouter.ai/api",
    "deepseek": "https://api.deepseek.com",
    "moonshot": "https://api.moonshot.ai",
    "mistral": "https://api.mistral.ai",
    "groq": "https://api.groq.com/openai",
    "xai": "https://api.x.ai",
    "ollama": "http://127.0.0.1:11434",
}
# The dialect names config.example.toml documents for `[routes.NAME] dialect`.
DOCUMENTED_DIALECTS = ("openai-chat", "openai-responses", "anthropic-messages", "gemini",
                       "ollama-ndjson", "sse", "json", "unknown")


def args(*argv: str):
    return build_parser().parse_args(["serve", *argv])


def toml(tmp_path, text: str, name: str = "streamtap.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


# -- defaults -----------------------------------------------------------------------------------
def test_documented_defaults():
    config = Config()
    assert config.host == "127.0.0.1"
    assert config.port == 8787
    assert config.trace_dir == "./streamtap-traces"
    assert config.session == "default"
    assert config.session_headers == ("x-session-affinity", "x-opencode-session", "x-session-id")
    assert config.log_format == "auto"
    assert config.capture_bodies is False
    assert config.answer_502_on_upstream_reset is False  # an early upstream reset is mirrored
    assert config.keep_ratelimit_headers is False
    assert config.max_request_body_bytes == 64 * 1024 * 1024
    assert config.max_header_bytes > 10_000  # a 10 kB session id must get past aiohttp
    assert config.max_frames == 10_000
    assert config.watchdog == Watchdog(connect_timeout_ms=30_000, idle_timeout_ms=0,
                                       progress_timeout_ms=0)
    assert {name: route.url for name, route in config.routes.items()} == BUILTIN_ROUTES
    assert all(route.dialect is None for route in config.routes.values())


def test_no_file_and_no_flags_is_the_defaults():
    assert config_from_args(args()) == Config()


def test_banner_gives_a_base_url_per_route():
    text = banner(Config(), 8787)
    assert text.splitlines()[0].endswith("listening on http://127.0.0.1:8787")
    assert "streamtap-traces" in text
    for name, url in BUILTIN_ROUTES.items():
        assert f"http://127.0.0.1:8787/{name}" in text, name
        assert url in text, name
    assert "http://127.0.0.1:8787/openai/v1" in text
    # the upstream URL exactly as configured: `/v1` belongs to the client's base URL only
    assert "https://api.openai.com/v1" not in text
    assert "WARNING" not in text


# -- layering -----------------------------------------------------------------------------------
LAYERED = """
port = 9000
host = "127.0.0.2"
trace_dir = "/srv/traces"
session_headers = ["X-My-Session", "x-session-id"]
keep_ratelimit_headers = true
capture_bodies = true

[watchdog]
idle_timeout_ms = 5000
progress_timeout_ms = 11

[routes]
openai = "http://127.0.0.1:9999/"
local = "http://127.0.0.1:8000"

[routes.gw]
url = "https://gw.example.com/openai"
dialect = "openai-chat"
"""


def test_toml_is_layered_over_the_defaults(tmp_path):
    config = load_file(toml(tmp_path, LAYERED))
    assert (config.port, config.host, config.trace_dir) == (9000, "127.0.0.2", "/srv/traces")
    assert config.session_headers == ("x-my-session", "x-session-id")  # header names: lowercase
    assert config.keep_ratelimit_headers is True and config.capture_bodies is True
    assert config.watchdog == Watchdog(connect_timeout_ms=30_000, idle_timeout_ms=5000,
                                       progress_timeout_ms=11)
    # untouched options keep their defaults
    assert config.session == "default" and config.log_format == "auto"
    assert config.max_request_body_bytes == Config().max_request_body_bytes
    # routes: built-ins kept, one replaced (trailing slash dropped), two added
    assert set(config.routes) == set(BUILTIN_ROUTES) | {"local", "gw"}
    assert config.routes["openai"].url == "http://127.0.0.1:9999"
    assert config.routes["anthropic"].url == BUILTIN_ROUTES["anthropic"]
    assert config.routes["gw"].url == "https://gw.example.com/openai"
    assert config.routes["gw"].dialect == "openai-chat"
    assert config.routes["local"].dialect is None


def test_flags_override_the_file(tmp_path):
    path = toml(tmp_path, LAYERED)
    config = config_from_args(args(
        "--config", str(path), "--port", "1234", "--trace-dir", "flag-traces",
        "--session", "s1", "--log-format", "json", "--idle-timeout-ms", "7",
        "--connect-timeout-ms", "0", "--route", "local=http://127.0.0.1:8001",
        "--route", "new=https://new.example.com/api/"))
    assert (config.port, config.trace_dir, config.session, config.log_format) == (
        1234, "flag-traces", "s1", "json")
    assert config.watchdog == Watchdog(connect_timeout_ms=0, idle_timeout_ms=7,
                                       progress_timeout_ms=11)  # progress: from the file
    assert config.routes["local"].url == "http://127.0.0.1:8001"
    assert config.routes["new"].url == "https://new.example.com/api"
    assert config.routes["gw"].dialect == "openai-chat"  # the file's route survives
    assert config.routes["openai"].url == "http://127.0.0.1:9999"
    # flags not given do not reset what the file set
    assert config.host == "127.0.0.2"
    assert config.capture_bodies is True
    assert config.session_headers == ("x-my-session", "x-session-id")


def test_the_502_answer_to_an_early_upstream_reset_is_a_file_key_and_a_flag(tmp_path):
    path = toml(tmp_path, "answer_502_on_upstream_reset = true\n")
    assert config_from_args(args("--config", str(path))).answer_502_on_upstream_reset is True
    assert config_from_args(args("--answer-502-on-upstream-reset")).answer_502_on_upstream_reset


def test_route_flag_replaces_a_builtin_route():
    config = config_from_args(args("--route", "anthropic=http://127.0.0.1:7000"))
    assert config.routes["anthropic"].url == "http://127.0.0.1:7000"
    assert len(config.routes) == len(BUILTIN_ROUTES)


# -- a route name a slip away from a built-in one --------------------------------------------------
TYPO_WARNING = "WARNING: route `opnai` is new; did you mean to replace `openai`? " \
               "/openai still goes to https://api.openai.com"


def test_readme_quotes_the_typo_warning_as_printed():
    from tests.readme import section

    assert TYPO_WARNING in " ".join(section("Quick start").split())


@pytest.mark.parametrize("name, builtin", [
    ("opnai", "openai"), ("openia", "openai"), ("OpenAI", "openai"), ("antrhopic", "anthropic"),
    ("gemni", "gemini"), ("ollamma", "ollama"), ("grok", "groq"), ("xia", "xai"),
    ("deepseak", "deepseek"), ("openrouterr", "openrouter")])
def test_a_route_name_near_a_builtin_is_said_to_be_new(name, builtin):
    config = config_from_args(args("--route", f"{name}=http://127.0.0.1:8788"))
    text = banner(config, 8787)
    assert f"WARNING: route `{name}` is new; did you mean to replace `{builtin}`? " \
           f"/{builtin} still goes to {BUILTIN_ROUTES[builtin]}" in text
    assert text.count("is new; did you mean") == 1


@pytest.mark.parametrize("name", ["openai", "fake", "local", "gw", "api", "rp", "my-gateway",
                                  "openai-proxy", "claude", "azure"])
def test_a_builtin_or_an_unrelated_route_name_gets_no_warning(name):
    text = banner(config_from_args(args("--route", f"{name}=http://127.0.0.1:8788")), 8787)
    assert "is new; did you mean" not in text


def test_a_route_typo_starts_with_a_warning_from_the_flag_and_from_the_config_file(fake,
                                                                                    tmp_path):
    flagged = ProxyProcess(tmp_path, {"opnai": fake.url}, ready="faults:")
    try:
        assert TYPO_WARNING in flagged.banner
        prefix = fake.add(Scenario(chat_text_stream(2)))
        resp = httpx.post(flagged.url("opnai") + prefix + "/v1/chat/completions",
                          json={"stream": True}, timeout=10)
        assert resp.status_code == 200  # it started anyway, and the new route forwards
    finally:
        flagged.stop()
    config = toml(tmp_path, f'[routes]\nopnai = "{fake.url}"\n')
    filed = ProxyProcess(tmp_path, {}, "--config", str(config), ready="faults:")
    try:
        assert TYPO_WARNING in filed.banner
    finally:
        filed.stop()
    exact = ProxyProcess(tmp_path, {"openai": fake.url}, ready="faults:")
    try:
        assert "faults: none armed" in exact.banner  # the whole banner was read
        assert "is new; did you mean" not in exact.banner
    finally:
        exact.stop()


# -- unknown keys -------------------------------------------------------------------------------
@pytest.mark.parametrize("text, key, suggestion", [
    ('trace_dri = "x"\n', "trace_dri", "`trace_dir`"),
    ("[watchdog]\nidle_timeout = 5\n", "watchdog.idle_timeout", "`watchdog.idle_timeout_ms`"),
    ('[routes.x]\nulr = "https://example.com"\n', "routes.x.ulr", "`routes.x.url`"),
    ("capture_body = true\n", "capture_body", "`capture_bodies`"),
    ("[watchdog]\nconect_timeout_ms = 5\n", "watchdog.conect_timeout_ms",
     "`watchdog.connect_timeout_ms`"),
])
def test_unknown_key_is_named_with_the_nearest_valid_one(tmp_path, text, key, suggestion):
    with pytest.raises(ConfigError) as raised:
        load_file(toml(tmp_path, text))
    assert raised.value.key == key
    message = str(raised.value)
    assert f"`{key}`" in message and "unknown key" in message
    assert f"did you mean {suggestion}?" in message


def test_unknown_key_with_no_near_match_lists_the_valid_ones(tmp_path):
    with pytest.raises(ConfigError) as raised:
        load_file(toml(tmp_path, "zzzzzz = 1\n"))
    assert raised.value.key == "zzzzzz"
    assert "trace_dir" in str(raised.value) and "watchdog" in str(raised.value)


# -- bad values ---------------------------------------------------------------------------------
@pytest.mark.parametrize("text, key", [
    ('port = "x"\n', "port"),
    ("port = 70000\n", "port"),
    ("port = -1\n", "port"),
    ("port = true\n", "port"),
    ("[watchdog]\nidle_timeout_ms = -5\n", "watchdog.idle_timeout_ms"),
    ("[watchdog]\nprogress_timeout_ms = 1.5\n", "watchdog.progress_timeout_ms"),
    ("max_request_body_bytes = -1\n", "max_request_body_bytes"),
    ('[routes]\nx = "api.example.com"\n', "routes.x.url"),
    ('[routes]\nx = "ftp://example.com"\n', "routes.x.url"),
    ('[routes]\nx = "https://example.com/?key=1"\n', "routes.x.url"),
    ('[routes.x]\nurl = "//example.com"\n', "routes.x.url"),
    ('[routes.x]\ndialect = "sse"\n', "routes.x.url"),
    ("[routes]\nx = 5\n", "routes.x"),
    ('[routes]\n_control = "https://example.com"\n', "routes._control"),
    ('log_format = "xml"\n', "log_format"),
    ('capture_bodies = "yes"\n', "capture_bodies"),
    ("max_frames = 1\n", "max_frames"),
    ('session_headers = "x-a"\n', "session_headers"),
    ("session_headers = [1]\n", "session_headers"),
    ('trace_dir = ""\n', "trace_dir"),
    ("trace_dir = 5\n", "trace_dir"),
    ("watchdog = 5\n", "watchdog"),
    ("port = \n", "--config"),  # not TOML at all
])
def test_bad_value_is_an_error_naming_the_key(tmp_path, text, key):
    with pytest.raises(ConfigError) as raised:
        load_file(toml(tmp_path, text))
    assert raised.value.key == key
    assert f"config error at `{key}`" in str(raised.value)


def test_missing_config_file_is_an_error(tmp_path):
    with pytest.raises(ConfigError) as raised:
        load_file(tmp_path / "nope.toml")
    assert raised.value.key == "--config" and "nope.toml" in str(raised.value)


@pytest.mark.parametrize("argv, key", [
    (("--route", "nourl"), "--route"),
    (("--route", "=https://example.com"), "--route"),
    (("--route", "x=api.example.com"), "--route.x.url"),
    (("--idle-timeout-ms", "-1"), "--idle-timeout-ms"),
    (("--connect-timeout-ms", "-30"), "--connect-timeout-ms"),
    (("--port", "70000"), "port"),
])
def test_bad_flag_is_an_error_naming_the_flag(argv, key):
    with pytest.raises(ConfigError) as raised:
        config_from_args(args(*argv))
    assert raised.value.key == key


def test_every_documented_dialect_is_accepted():
    for name in DOCUMENTED_DIALECTS:
        assert make_route("x", "https://example.com", name).dialect == name


def test_unknown_dialect_is_an_error_suggesting_the_nearest(tmp_path):
    text = '[routes.x]\nurl = "https://example.com"\ndialect = "openai_chat"\n'
    with pytest.raises(ConfigError) as raised:
        load_file(toml(tmp_path, text))
    assert "openai_chat" in str(raised.value)
    assert "`openai-chat`" in str(raised.value)


def test_unknown_dialect_error_names_where_it_is(tmp_path):
    text = '[routes.x]\nurl = "https://example.com"\ndialect = "openai_chat"\n'
    with pytest.raises(ConfigError) as raised:
        load_file(toml(tmp_path, text))
    assert raised.value.key == "routes.x.dialect"
    assert "`routes.x.dialect`" in str(raised.value)
    assert "openai_chat" in str(raised.value) and "`openai-chat`" in str(raised.value)
    assert "unknown key" not in str(raised.value)  # the key is fine; its value is not


def test_route_flag_parsing():
    route = parse_route_flag(" local = http://127.0.0.1:8000/v1/ ")
    assert (route.name, route.url, route.dialect) == ("local", "http://127.0.0.1:8000/v1", None)


# -- the command line: errors stop the process before it listens ---------------------------------
def run_serve(tmp_path, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "streamtap", "serve", "--port", "0", *argv],
                          cwd=tmp_path, capture_output=True, text=True, timeout=30,
                          )


@pytest.mark.e2e
def test_bad_config_file_exits_2_before_listening(tmp_path):
    bad = toml(tmp_path, 'trace_dri = "elsewhere"\n', "bad.toml")
    out = run_serve(tmp_path, "--config", str(bad))
    assert out.returncode == 2
    assert "listening" not in out.stdout and out.stdout == ""
    assert "config error at `trace_dri`" in out.stderr
    assert "did you mean `trace_dir`?" in out.stderr
    assert not (tmp_path / "streamtap-traces").exists()  # nothing was created either
    assert not (tmp_path / "elsewhere").exists()


@pytest.mark.parametrize("argv, needle", [
    (("--route", "x=api.example.com"), "`--route.x.url`"),
    (("--idle-timeout-ms", "-5"), "`--idle-timeout-ms`"),
    (("--port", "x"), "invalid int value"),  # argparse's own error, also exit 2
])
@pytest.mark.e2e
def test_bad_flags_exit_2_before_listening(tmp_path, argv, needle):
    out = run_serve(tmp_path, *argv)
    assert out.returncode == 2
    assert out.stdout == ""
    assert needle in out.stderr


@pytest.mark.e2e
def test_port_in_use_exits_1_with_a_hint(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        out = subprocess.run(
            [sys.executable, "-m", "streamtap", "serve", "--port", str(port),
             "--trace-dir", str(tmp_path / "traces")],
            cwd=tmp_path, capture_output=True, text=True, timeout=30,
            )
    assert out.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port}" in out.stderr and "--port" in out.stderr
    assert "listening on" not in out.stdout
