"""Well-known client timeouts, so that a client that closed after a silence can be told it met
its own default ("300 s is the default bodyTimeout of Node's fetch") rather than a provider's
failure.

Each row cites where the default is set; change a row only with a new source.
"""

from __future__ import annotations

from dataclasses import dataclass

HEADERS = "headers"  # the timer runs until the response headers arrive
BODY = "body"  # the timer runs between body bytes
ANY = "any"  # one timer for every read (httpx's read timeout covers headers and body)


@dataclass(frozen=True)
class ClientDefault:
    client: str
    setting: str
    ms: int
    waits_for: str  # HEADERS | BODY | ANY


CLIENT_DEFAULTS = (
    # Node's fetch is undici. undici docs/api/Client.md: "headersTimeout ... Default: `300e3`"
    # and "bodyTimeout ... Default: `300e3` ... Monitors time between receiving body data"
    # (set back to 300 s by nodejs/undici#1937 after a 30 s spell in Node 18.14.1; Node 20 ships
    # undici 6.x with the same defaults).
    ClientDefault("Node's fetch", "headersTimeout", 300_000, HEADERS),
    ClientDefault("Node's fetch", "bodyTimeout", 300_000, BODY),
    # openai-python src/openai/_constants.py: DEFAULT_TIMEOUT = httpx.Timeout(timeout=600,
    # connect=5.0), so 600 s for every read.
    ClientDefault("the openai Python SDK", "timeout", 600_000, ANY),
    # anthropic-sdk-python src/anthropic/_constants.py: DEFAULT_TIMEOUT =
    # httpx.Timeout(timeout=10 * 60, connect=5.0).
    ClientDefault("the anthropic Python SDK", "timeout", 600_000, ANY),
    # httpx httpx/_config.py: DEFAULT_TIMEOUT_CONFIG = Timeout(timeout=5.0); docs/advanced/
    # timeouts.md: "raise a TimeoutException after 5 seconds of network inactivity".
    ClientDefault("httpx", "timeout", 5_000, ANY),
)

# A timer fires at its limit and streamtap sees the close a moment later (the client's timer
# starts after streamtap forwarded the last byte): a silence matches a default from the limit
# up to this much beyond it.
SLACK_MS = 500
SLACK_RATIO = 0.02


def matching_defaults(silence_ms: float, waiting_for: str) -> list[ClientDefault]:
    """The defaults a client could have met after `silence_ms` waiting for `waiting_for`
    (HEADERS or BODY)."""
    return [row for row in CLIENT_DEFAULTS
            if row.waits_for in (waiting_for, ANY)
            and row.ms <= silence_ms <= row.ms + max(SLACK_MS, row.ms * SLACK_RATIO)]


def describe(rows: list[ClientDefault]) -> str:
    """`300 s is the default bodyTimeout of Node's fetch`; rows that match one silence share
    their limit, so it is said once and the clients are joined with `or`."""
    whose = " or ".join(f"the default {row.setting} of {row.client}" for row in rows)
    return f"{rows[0].ms / 1000:g} s is {whose}"
