"""structlog, configured once at start-up: console lines on a TTY, JSON otherwise."""

from __future__ import annotations

import logging
import sys

import structlog

from streamtap.diagnostics.record.redact import scrub


class _ScrubSecrets(logging.Filter):
    """aiohttp logs a malformed request's offending header line verbatim (an Authorization
    header among them): scrub every stdlib log record, traceback included."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if record.exc_info:
            message += "\n" + logging.Formatter().formatException(record.exc_info)
        record.msg, record.args, record.exc_info, record.exc_text = scrub(message), None, None, None
        return True


def configure_logging(log_format: str = "auto", stream=None) -> structlog.stdlib.BoundLogger:
    stream = stream or sys.stderr
    use_console = log_format == "console" or (log_format == "auto" and stream.isatty())
    # Keys in the order they were given: a request line ends with its summary and record path.
    renderer = (structlog.dev.ConsoleRenderer(colors=stream.isatty(), sort_keys=False)
                if use_console
                else structlog.processors.JSONRenderer())
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.INFO),
        logger_factory=structlog.PrintLoggerFactory(stream),
        cache_logger_on_first_use=True,
    )
    # aiohttp's own loggers (access log off; errors still reach stderr)
    logging.basicConfig(level=logging.WARNING, stream=stream, format="%(name)s: %(message)s")
    for handler in logging.getLogger().handlers:
        handler.addFilter(_ScrubSecrets())
    return structlog.get_logger("streamtap")


def canonical_fields(record: dict, path: str | None = None) -> dict:
    """The one line a request gets at its end: it ends with the summary sentence and the path of
    the record that explains it (None when the record could not be written)."""
    outcome = record.get("outcome") or {}
    request = record.get("request") or {}
    timeline = record.get("timeline") or {}
    return {
        "trace_id": record["trace_id"],
        "session": record["session_id"],
        "route": record["route"],
        "method": request.get("method"),
        "path": request.get("path"),
        "status": (record.get("downstream") or {}).get("status"),
        "model": request.get("model"),
        "dialect": record.get("dialect"),
        "ttfb_ms": timeline.get("first_byte"),
        "frames": (record.get("stream") or {}).get("frame_count"),
        "bytes": (record.get("stream") or {}).get("bytes"),
        "boundary": outcome.get("boundary"),
        "phase": outcome.get("phase"),
        "duration_ms": timeline.get("duration_ms"),
        "summary": outcome.get("summary"),
        "record": path,
    }
