"""The first run of a probe, on a complete stream: it must succeed, or the probe stops and says
why (the client is not pointed at streamtap, the dialect is wrong, the command fails on its
own). Fed what the run did and what its requests spoke; returns the client's dialect."""

from __future__ import annotations

from streamtap.diagnostics.probe.catalog import ALL_DIALECTS
from streamtap.diagnostics.probe.grade import Run
from streamtap.diagnostics.errors import UserError


class BaselineError(UserError, ValueError):
    """The client cannot be probed as it is; says why and what to change."""


def baseline_dialect(run: Run, dialects: list[str], first_request: str, wanted: str | None,
                     limit_s: float, named_by: str = "") -> str:
    """The dialect of the client's first request (`dialects`, one per request; `first_request`
    is `METHOD PATH`), or BaselineError. `wanted` is the dialect the user named, if any, or
    the one `named_by` names (the repro folders of `--from`)."""
    if run.killed:
        raise BaselineError(f"on a complete stream the client did not finish within "
                            f"{limit_s:g} s: raise the time limit, or check that it ends on "
                            "its own")
    if not dialects:
        said = f": {run.error_line}" if run.error_line else ""
        raise BaselineError(
            f"on a complete stream the client made no request to streamtap (it ended with "
            f"exit status {run.exit_status}{said}): point it at $OPENAI_BASE_URL, "
            "$ANTHROPIC_BASE_URL or $STREAMTAP_BASE_URL, or put {base_url} in its arguments")
    spoken = dialects[0]
    if spoken not in ALL_DIALECTS:
        raise BaselineError(
            f"the client's first request, {first_request}, speaks no dialect the fake provider "
            f"answers ({spoken}): is its base URL right? The OpenAI SDKs want one ending in "
            "/v1 ($OPENAI_BASE_URL, or --dialect openai-chat with {base_url})")
    if wanted and spoken != wanted:
        by = f" by {named_by}" if named_by else ""
        raise BaselineError(f"the dialect is wrong: {wanted} was named{by}, the client speaks "
                            f"{spoken}")
    if run.exit_status != 0:
        raise BaselineError(f"the client fails on its own, on a complete stream (exit status "
                            f"{run.exit_status}): {run.error_line or 'it printed no error'}")
    return spoken
