"""structlog, configured once at start-up: console lines on a TTY, JSON otherwise."""

from __future__ import annotations

import logging
import re
import sys

import structlog

from streamtap.diagnostics.trace_record import TraceRecord
from streamtap.diagnostics.redaction.redact import scrub
from streamtap.diagnostics.verdict.fingerprints import describe, errno_name


# A library's log template is kept only if it is plain words (aiohttp's are constants such as
# "Error handling request from %s"); its arguments never are: they can be the request itself.
_TEMPLATE = re.compile(r"[A-Za-z0-9 %.,:;()'!_/-]{1,160}")


class _LibraryLogsAsOneLine(logging.Handler):
    """aiohttp's server errors (and any other library's warnings) as ONE line of streamtap's own
    log, in its format (console or JSON): the logger, the template, the exception's class, errno
    name and a message streamtap builds. No traceback and no `str(exc)`: aiohttp's message for a
    malformed request quotes the offending header line (an `x-api-key: ...` among them)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            template = record.msg if isinstance(record.msg, str) else ""
            fields: dict = {
                "logger": record.name[:64],
                "what": scrub(template) if _TEMPLATE.fullmatch(template) else "(not recorded)",
            }
            exc = record.exc_info[1] if record.exc_info else None
            if exc is not None:
                code = errno_name(exc)
                fields.update(error=type(exc).__name__[:64], code=code,
                              message=describe(exc, code))
            log = structlog.get_logger("streamtap")
            if record.levelno >= logging.ERROR:
                log.error("library_error", **fields)
            else:
                log.warning("library_warning", **fields)
        except Exception:  # logging must never take the proxy down
            self.handleError(record)


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
    # aiohttp's own loggers (access log off): their warnings and errors become one line each
    root = logging.getLogger()
    root.setLevel(logging.WARNING)
    for handler in list(root.handlers):
        if isinstance(handler, _LibraryLogsAsOneLine):
            root.removeHandler(handler)  # configured again (tests): one line, not two
    root.addHandler(_LibraryLogsAsOneLine())
    return structlog.get_logger("streamtap")


def canonical_fields(record: TraceRecord, path: str | None = None) -> dict:
    """The one line a request gets at its end: it ends with the summary sentence and the path of
    the record that explains it (None when the record could not be written). Its names mean what
    they mean in the index line (diagnostics/record/schema.py index_line): `status` is the
    upstream's answer, `downstream_status` what the client got."""
    outcome = record.outcome
    request = record.request
    timeline = record.timeline
    return {
        "trace_id": record.trace_id,
        "session_id": record.session_id,
        "route": record.route,
        "method": request.method,
        "path": request.path,
        "status": record.response.status if record.response else None,
        "downstream_status": record.downstream.status,
        "model": request.model,
        "dialect": record.dialect,
        "ttfb_ms": timeline.first_byte,
        "frames": record.stream.frame_count,
        "bytes": record.stream.bytes,
        "boundary": outcome.boundary if outcome else None,
        "phase": outcome.phase if outcome else None,
        "duration_ms": timeline.duration_ms,
        "summary": outcome.summary if outcome else None,
        "record": path,
    }
