"""`streamtap fault ...`: a small client of the control API (standard library only)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

from streamtap.diagnostics.faults.rules import FaultError
from streamtap.diagnostics.errors import UpstreamError

DEFAULT_PROXY = "http://127.0.0.1:8787"


class ControlError(UpstreamError, RuntimeError):
    pass


def call(proxy: str, method: str, path: str, body: object = None) -> dict:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(proxy.rstrip("/") + "/_streamtap/" + path, data=data,
                                     method=method,
                                     headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as exc:
        try:
            error = json.loads(exc.read()).get("error", {})
        except ValueError:
            error = {}
        field = f" (field `{error['field']}`)" if error.get("field") else ""
        raise ControlError(f"{error.get('message') or exc}{field}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise ControlError(f"cannot reach streamtap at {proxy}: {getattr(exc, 'reason', exc)}; "
                           "is `streamtap serve` running there?") from None


def _pairs(items: list[str], flag: str) -> dict[str, str]:
    pairs = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise FaultError(flag, f"expected KEY=VALUE, got {item!r}")
        pairs[key.strip()] = value.strip()
    return pairs


def rule_from_flags(name: str | None, action: str, at: str | None, times: int | None,
                    probability: float | None, seed: int | None, match: list[str],
                    settings: list[str]) -> dict:
    rule: dict = {"action": action}
    for key, value in (("name", name), ("at", at), ("times", times),
                       ("probability", probability), ("seed", seed)):
        if value is not None:
            rule[key] = value
    if match:
        rule["match"] = _pairs(match, "--match")
    rule.update(_pairs(settings, "--set"))
    return rule
