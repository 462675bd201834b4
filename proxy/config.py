"""Every option streamtap has, with its default and a line of doc, in one place.

Three layers, later ones win: the defaults below, a TOML file (`--config`), command-line flags.
An unknown key or a bad value is a ConfigError that names the key (and the nearest valid one), so
the process can exit before it listens.
"""

from __future__ import annotations

import difflib
import re
import tomllib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from urllib.parse import unquote, urlsplit

from streamtap.diagnostics.dialects import DIALECT_NAMES
from streamtap.diagnostics.faults.rules import (FaultError, FaultRule, check_route_match,
                                                rule_from_mapping)
from streamtap.diagnostics.views.genai_conventions import (LATEST, SEMCONV_OPT_IN_VARIABLE, V1_41,
                                                           vocabulary)
from streamtap.diagnostics.errors import UserError


class ConfigError(UserError, ValueError):
    """A bad option. `key` is the option at fault, as the user wrote it."""

    def __init__(self, key: str, message: str):
        super().__init__(f"config error at `{key}`: {message}")
        self.key = key


@dataclass(frozen=True)
class Route:
    name: str
    url: str  # upstream base URL; the rest of the client's path and its query are appended
    dialect: str | None = None  # force a dialect; default: inferred from path and content type
    example_suffix: str = ""  # what a client's base URL adds after the route, shown at start

    def base_url(self, host: str, port: int) -> str:
        return f"http://{host}:{port}/{self.name}{self.example_suffix}"


DEFAULT_ROUTES = {
    route.name: route for route in (
        Route("openai", "https://api.openai.com", example_suffix="/v1"),
        Route("anthropic", "https://api.anthropic.com"),
        Route("gemini", "https://generativelanguage.googleapis.com", example_suffix="/v1beta"),
        Route("openrouter", "https://openrouter.ai/api", example_suffix="/v1"),
        Route("deepseek", "https://api.deepseek.com"),
        Route("moonshot", "https://api.moonshot.ai", example_suffix="/v1"),
        Route("mistral", "https://api.mistral.ai", example_suffix="/v1"),
        Route("groq", "https://api.groq.com/openai", example_suffix="/v1"),
        Route("xai", "https://api.x.ai", example_suffix="/v1"),
        Route("ollama", "http://127.0.0.1:11434"),
    )
}


@dataclass(frozen=True)
class Watchdog:
    connect_timeout_ms: int = 30_000  # upstream TCP/TLS connect; 0 = wait forever
    idle_timeout_ms: int = 0  # abort when no byte arrived for this long (0 = off)
    progress_timeout_ms: int = 0  # abort when the model made no progress for this long (0 = off)


OTLP_PROTOCOLS = ("http/protobuf",)


@dataclass(frozen=True)
class OtlpExport:
    """`[export.otlp]`: every record as an OpenTelemetry span, sent over OTLP/HTTP."""

    endpoint: str = ""  # base URL, `/v1/traces` is appended (as OTEL_EXPORTER_OTLP_ENDPOINT); "" = off
    traces_endpoint: str = ""  # the full URL instead (as OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)
    # Sent with every export (a backend's API key): never recorded, logged or shown in health.
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    protocol: str = "http/protobuf"  # the only one: grpc would need another package
    batch_size: int = 256  # spans per export request
    queue_limit: int = 2048  # records waiting for export; past this they are dropped and counted
    timeout_ms: int = 10_000  # one export request, retries included
    project: str = ""  # resource attribute value naming the project/team ("" = none)
    project_attribute: str = "openinference.project.name"  # Phoenix files spans by this one
    frame_events: int = 200  # per-frame span events kept per span, head and tail
    metrics: bool = False  # also the request counters and timing histograms, to /v1/metrics
    metrics_interval_ms: int = 60_000  # how often metrics are sent (the SDK's default)
    # Which version of the GenAI conventions names go by: "v1.41.0", or
    # "gen_ai_latest_experimental" when OTEL_SEMCONV_STABILITY_OPT_IN lists it.
    semconv: str = "v1.41.0"

    @property
    def url(self) -> str:
        """Where spans go, or "" when export is off."""
        if self.traces_endpoint:
            return self.traces_endpoint
        return f"{self.endpoint}/v1/traces" if self.endpoint else ""

    @property
    def metrics_url(self) -> str:
        """Where metrics go, or "" when they are off (the traces URL's sibling)."""
        if not self.metrics or not self.url:
            return ""
        if self.endpoint and not self.traces_endpoint:
            return f"{self.endpoint}/v1/metrics"
        base = self.traces_endpoint.removesuffix("/v1/traces")
        return f"{base}/v1/metrics"


@dataclass(frozen=True)
class Export:
    otlp: OtlpExport = field(default_factory=OtlpExport)


@dataclass(frozen=True)
class Config:
    host: str = "127.0.0.1"  # bind address; anything but loopback exposes the API keys it carries
    port: int = 8787
    trace_dir: str = "./streamtap-traces"
    session: str = "default"  # session id when the request names none
    session_headers: tuple[str, ...] = ("x-session-affinity", "x-opencode-session",
                                        "x-session-id")
    log_format: str = "auto"  # auto (console on a TTY, JSON otherwise) | console | json
    capture_bodies: bool = False  # local debugging only: raw bodies go to a side file
    trace_header: bool = False  # add x-streamtap-trace-id to every proxied answer (opt-in)
    # An upstream that resets the connection before any response byte: false resets the client's
    # connection too (what a direct client sees: a connection error, which SDKs retry); true
    # answers 502 instead.
    answer_502_on_upstream_reset: bool = False
    keep_ratelimit_headers: bool = False  # rate-limit headers reveal tier and usage
    max_request_body_bytes: int = 64 * 1024 * 1024  # larger bodies get a 413
    max_header_bytes: int = 64 * 1024  # one request header line; a 10 kB session id must fit
    max_frames: int = 10_000  # frames kept per record (head and tail)
    max_line_bytes: int = 8 * 1024 * 1024  # longer SSE lines are a protocol error
    max_shapes: int = 256  # distinct frame shapes kept per record
    uvloop: bool = True  # use uvloop when it is installed
    routes: dict[str, Route] = field(default_factory=lambda: dict(DEFAULT_ROUTES))
    watchdog: Watchdog = field(default_factory=Watchdog)
    faults: tuple[FaultRule, ...] = ()  # `[[faults]]` tables: rules armed from the start
    export: Export = field(default_factory=Export)  # `[export.otlp]`: spans to a trace backend
    # -- metrics (GET /_streamtap/metrics, Prometheus text format, loopback only like all of
    # /_streamtap/) --
    # HOST:PORT of an extra listener that serves only GET /metrics, for a scraper on another host
    # ("" = none). Read-only, but anyone who can reach it reads routes, models and failure counts.
    metrics_listen: str = ""
    metrics_label_values: int = 100  # distinct values kept per label (model, route...), then `other`


def default_of(key: str) -> object:
    """The default of one option by its dotted key (`port`, `watchdog.idle_timeout_ms`,
    `export.otlp.batch_size`), read from the dataclasses above: help texts show this, so they
    cannot drift from the default that applies (tests/unit/test_config_defaults.py)."""
    value: object = Config()
    for part in key.split("."):
        value = getattr(value, part)
    return value


def default_proxy_url() -> str:
    """Where `streamtap serve` listens when told nothing: what `fault` and `tail` talk to."""
    return f"http://{default_of('host')}:{default_of('port')}"


_ROUTE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_LOG_FORMATS = ("auto", "console", "json")
_TOP_KEYS = tuple(f.name for f in fields(Config))
_WATCHDOG_KEYS = tuple(f.name for f in fields(Watchdog))
_ROUTE_KEYS = ("url", "dialect")
_OTLP_KEYS = tuple(f.name for f in fields(OtlpExport))


def _unknown(key: str, valid: tuple[str, ...], where: str = "") -> ConfigError:
    close = difflib.get_close_matches(key.rsplit(".", 1)[-1], valid, n=1)
    hint = f"; did you mean `{where}{close[0]}`?" if close else f"; valid keys: {', '.join(valid)}"
    return ConfigError(key, f"unknown key{hint}")


def _expect(key: str, value: object, kind: type | tuple[type, ...], what: str) -> None:
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ConfigError(key, f"expected {what}, got {value!r}")


def _non_negative(key: str, value: object) -> int:
    _expect(key, value, int, "a whole number")
    if value < 0:  # type: ignore[operator]
        raise ConfigError(key, f"must be 0 or more, got {value}")
    return value  # type: ignore[return-value]


def check_url(key: str, url: object) -> str:
    _expect(key, url, str, "an http(s) URL")
    parts = urlsplit(url)  # type: ignore[arg-type]
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(key, f"expected an http(s) URL such as https://api.openai.com, got "
                               f"{url!r}")
    if parts.query or parts.fragment:
        raise ConfigError(key, "a route URL takes no query or fragment")
    return url.rstrip("/")  # type: ignore[union-attr]


def make_route(name: str, url: object, dialect: object = None, key: str = "routes") -> Route:
    if not _ROUTE_NAME.fullmatch(name) or name.startswith("_"):
        raise ConfigError(f"{key}.{name}", "a route name is letters, digits, `_`, `.` or `-`")
    url = check_url(f"{key}.{name}.url", url)
    if dialect is not None:
        _expect(f"{key}.{name}.dialect", dialect, str, "a dialect name")
        if dialect not in DIALECT_NAMES:
            close = difflib.get_close_matches(dialect, DIALECT_NAMES, n=1)
            hint = f"did you mean `{close[0]}`?" if close else f"valid: {', '.join(DIALECT_NAMES)}"
            raise ConfigError(f"{key}.{name}.dialect", f"unknown dialect {dialect!r}; {hint}")
    previous = DEFAULT_ROUTES.get(name)
    suffix = previous.example_suffix if previous and previous.url == url else ""
    return Route(name, url, dialect, suffix)  # type: ignore[arg-type]


def _routes(table: object) -> dict[str, Route]:
    _expect("routes", table, dict, "a table of routes")
    routes = dict(DEFAULT_ROUTES)
    for name, spec in table.items():  # type: ignore[union-attr]
        if isinstance(spec, str):
            routes[name] = make_route(name, spec)
            continue
        _expect(f"routes.{name}", spec, dict, "a URL string or a table with `url`")
        for key in spec:
            if key not in _ROUTE_KEYS:
                raise _unknown(f"routes.{name}.{key}", _ROUTE_KEYS, f"routes.{name}.")
        if "url" not in spec:
            raise ConfigError(f"routes.{name}.url", "missing; every route needs an upstream URL")
        routes[name] = make_route(name, spec["url"], spec.get("dialect"))
    return routes


def _watchdog(table: object) -> Watchdog:
    _expect("watchdog", table, dict, "a table")
    values = {}
    for key, value in table.items():  # type: ignore[union-attr]
        if key not in _WATCHDOG_KEYS:
            raise _unknown(f"watchdog.{key}", _WATCHDOG_KEYS, "watchdog.")
        values[key] = _non_negative(f"watchdog.{key}", value)
    return Watchdog(**values)


def _otlp(table: object, base: OtlpExport) -> OtlpExport:
    _expect("export.otlp", table, dict, "a table")
    values: dict = {}
    for key, value in table.items():  # type: ignore[union-attr]
        where = f"export.otlp.{key}"
        if key not in _OTLP_KEYS:
            raise _unknown(where, _OTLP_KEYS, "export.otlp.")
        if key in ("endpoint", "traces_endpoint"):
            values[key] = check_url(where, value) if value else ""
        elif key == "headers":
            _expect(where, value, dict, "a table of header names and values")
            for name, text in value.items():
                _expect(f"{where}.{name}", text, str, "a string")
            values[key] = tuple(value.items())
        elif isinstance(getattr(base, key), bool):
            _expect(where, value, bool, "true or false")
            values[key] = value
        elif isinstance(getattr(base, key), int):
            values[key] = _non_negative(where, value)
        else:
            _expect(where, value, str, "a string")
            values[key] = value
    if "endpoint" in values and "traces_endpoint" not in values:
        values["traces_endpoint"] = ""  # this file's base URL beats a full URL from OTEL_*
    return replace(base, **values)


def _export(table: object, base: Export) -> Export:
    _expect("export", table, dict, "a table such as [export.otlp]")
    for key in table:  # type: ignore[union-attr]
        if key != "otlp":
            raise _unknown(f"export.{key}", ("otlp",), "export.")
    return Export(otlp=_otlp(table["otlp"], base.otlp)) if "otlp" in table else base  # type: ignore[index]


def otlp_from_env(environ: dict[str, str], base: OtlpExport = OtlpExport()) -> OtlpExport:
    """The standard OTEL_EXPORTER_OTLP_* (and OTEL_BSP_*) variables over `base`.

    Timeouts are milliseconds, as the OpenTelemetry specification says.
    """
    def get(name: str) -> str | None:
        value = environ.get(f"OTEL_EXPORTER_OTLP_TRACES_{name}") or \
            environ.get(f"OTEL_EXPORTER_OTLP_{name}")
        return value.strip() if value and value.strip() else None

    values: dict = {}
    if environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip():
        values["traces_endpoint"] = check_url("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                                              environ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"].strip())
    if environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip():
        values["endpoint"] = check_url("OTEL_EXPORTER_OTLP_ENDPOINT",
                                       environ["OTEL_EXPORTER_OTLP_ENDPOINT"].strip())
    headers = get("HEADERS")
    if headers:
        pairs = []
        for item in headers.split(","):
            name, sep, value = item.partition("=")
            if not sep or not name.strip():
                raise ConfigError("OTEL_EXPORTER_OTLP_HEADERS", "expected name=value pairs "
                                  "separated by commas")
            pairs.append((unquote(name.strip()), unquote(value.strip())))
        values["headers"] = tuple(pairs)
    for name, key in (("TIMEOUT", "timeout_ms"),):
        text = get(name)
        if text is not None:
            if not text.isdigit():
                raise ConfigError(f"OTEL_EXPORTER_OTLP_{name}", f"expected milliseconds, got "
                                                                 f"{text!r}")
            values[key] = int(text)
    protocol = get("PROTOCOL")
    if protocol is not None:
        values["protocol"] = protocol
    for env, key in (("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "batch_size"),
                     ("OTEL_BSP_MAX_QUEUE_SIZE", "queue_limit")):
        text = environ.get(env, "").strip()
        if text:
            if not text.isdigit():
                raise ConfigError(env, f"expected a whole number, got {text!r}")
            values[key] = int(text)
    if vocabulary(environ.get(SEMCONV_OPT_IN_VARIABLE)) is LATEST:
        values["semconv"] = LATEST.name
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        values["endpoint"] = values["traces_endpoint"] = ""
    return replace(base, **values)


def _faults(tables: object) -> tuple[FaultRule, ...]:
    _expect("faults", tables, list, "an array of [[faults]] tables")
    rules: dict[str, FaultRule] = {}
    for index, table in enumerate(tables):  # type: ignore[arg-type]
        try:
            rule = rule_from_mapping(table, "config", default_name=f"fault-{index + 1}")
        except FaultError as exc:
            raise ConfigError(f"faults[{index}].{exc.field}", exc.message) from None
        if rule.name in rules:
            raise ConfigError(f"faults[{index}].name", f"`{rule.name}` is used twice")
        rules[rule.name] = rule
    return tuple(rules.values())


def from_mapping(data: dict, base: Config = Config()) -> Config:
    """Apply a parsed TOML document over `base`, validating every key."""
    values: dict = {}
    for key, value in data.items():
        if key not in _TOP_KEYS:
            raise _unknown(key, _TOP_KEYS)
        if key == "routes":
            values[key] = _routes(value)
        elif key == "watchdog":
            values[key] = _watchdog(value)
        elif key == "faults":
            values[key] = _faults(value)
        elif key == "export":
            values[key] = _export(value, base.export)
        elif key == "session_headers":
            _expect(key, value, list, "a list of header names")
            for item in value:
                _expect(key, item, str, "a header name")
            values[key] = tuple(item.lower() for item in value)
        else:
            default = getattr(Config(), key)
            if isinstance(default, bool):
                _expect(key, value, bool, "true or false")
            elif isinstance(default, int):
                value = _non_negative(key, value)
            else:
                _expect(key, value, str, "a string")
            values[key] = value
    return validate(replace(base, **values))


def validate(config: Config) -> Config:
    if config.log_format not in _LOG_FORMATS:
        raise ConfigError("log_format", f"expected one of {', '.join(_LOG_FORMATS)}, got "
                                        f"{config.log_format!r}")
    if not 0 <= config.port <= 65535:
        raise ConfigError("port", f"expected 0..65535, got {config.port}")
    if config.max_frames < 2:
        raise ConfigError("max_frames", "keep at least 2 frames (a head and a tail)")
    if not config.trace_dir:
        raise ConfigError("trace_dir", "must name a directory")
    for index, rule in enumerate(config.faults):
        try:
            check_route_match(rule, config.routes)
        except FaultError as exc:
            raise ConfigError(f"faults[{index}].{exc.field}", exc.message) from None
    otlp = config.export.otlp
    if otlp.protocol not in OTLP_PROTOCOLS:
        raise ConfigError("export.otlp.protocol", f"only {', '.join(OTLP_PROTOCOLS)} is "
                                                  f"supported, got {otlp.protocol!r}; point it "
                                                  "at the backend's OTLP/HTTP port (often 4318)")
    for key in ("batch_size", "queue_limit", "metrics_interval_ms"):
        if getattr(otlp, key) < 1:
            raise ConfigError(f"export.otlp.{key}", "must be 1 or more")
    if otlp.semconv not in (V1_41.name, LATEST.name):
        raise ConfigError("export.otlp.semconv", f"expected {V1_41.name!r} or {LATEST.name!r}, "
                                                 f"got {otlp.semconv!r}")
    if config.metrics_listen:
        parse_listen("metrics_listen", config.metrics_listen)
    if config.metrics_label_values < 1:
        raise ConfigError("metrics_label_values", "keep at least 1 value per label")
    return config


def check_layers(config: Config) -> Config:
    """What only the final config (defaults, env, file and flags together) can be checked for."""
    if config.export.otlp.metrics and not config.export.otlp.url:
        raise ConfigError("export.otlp.metrics", "metrics go beside the spans: set `endpoint` "
                                                 "(or --otlp-endpoint, or OTEL_EXPORTER_OTLP_ENDPOINT)")
    return config


def parse_listen(key: str, text: str) -> tuple[str, int]:
    """`HOST:PORT` (an IPv6 host in brackets: `[::1]:9464`) -> (host, port)."""
    host, sep, port = text.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ConfigError(key, f"expected HOST:PORT such as 0.0.0.0:9464, got {text!r}")
    return host, int(port)


def load_file(path: str | Path, base: Config = Config()) -> Config:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError("--config", f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError("--config", f"{path} is not valid TOML: {exc}") from None
    return from_mapping(data, base)


def parse_route_flag(text: str) -> Route:
    """`NAME=URL` from `--route`."""
    name, sep, url = text.partition("=")
    if not sep or not name:
        raise ConfigError("--route", f"expected NAME=URL, got {text!r}")
    return make_route(name.strip(), url.strip(), key="--route")
