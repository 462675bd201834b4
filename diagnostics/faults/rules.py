"""Fault rules: what to inject, when, into which requests; and the book that holds them.

A rule is one flat set of keys wherever it comes from (config `[[faults]]`, the
`x-streamtap-fault` header, the control API, the CLI). When several rules match a request, the
header wins, then API rules, then config rules. A rule with a `seed` draws from its own random
sequence, so the same seed gives the same pattern of fired faults.

No I/O, so that config (which validates `[[faults]]` at load) sits below the proxy's fault
machinery (proxy/faults), which carries a rule out on a live response.
"""

from __future__ import annotations

import difflib
import fnmatch
import json
import random
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, fields

from streamtap.diagnostics.faults.triggers import Trigger, TriggerError, parse_trigger
from streamtap.diagnostics.errors import UserError

ACTIONS = ("reset", "truncate", "close", "drop_terminal", "stall", "error_chunk", "http_error",
           "delay", "throttle", "hold", "bad_chunk_size")
# Faults that only slow a stream; the others end or alter it (and make the outcome `injected`).
SLOWING = ("delay", "throttle")
DEFAULT_AT = {"http_error": "request", "drop_terminal": "terminal", "delay": "headers",
              "hold": "terminal"}
MATCH_KEYS = ("route", "path", "model", "session")
SOURCES = ("header", "api", "config")
FAULT_HEADER = "x-streamtap-fault"
_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")


class FaultError(UserError, ValueError):
    """A bad rule. `field` names the key at fault."""

    def __init__(self, field: str, message: str):
        super().__init__(f"fault rule `{field}`: {message}")
        self.field = field
        self.message = message


@dataclass
class FaultRule:
    name: str
    action: str
    at: str = ""
    match: dict[str, str] = field(default_factory=dict)
    probability: float = 1.0
    seed: int | None = None
    times: int = 0  # fire N times, then the rule is spent; 0 = no limit
    # action parameters
    status: int = 500
    retry_after: str | None = None
    style: str = "event"  # error_chunk: event (the dialect's native error) | wrapped
    type: str | None = None
    code: str | int | None = None
    message: str | None = None
    # error_chunk: a JSON text sent as the frame's whole data instead of a dialect's error shape
    # (compact, one line); a user's own test input, never a provider's.
    body: str | None = None
    duration_ms: int = 0  # stall: 0 = until the client gives up
    then: str = "close"  # stall: how it ends, close | reset
    # stall, hold: a keep-alive every N ms while nothing else is sent (an SSE comment; a blank
    # line for NDJSON, which has no comment); 0 = silence
    heartbeat_ms: int = 0
    latency_ms: int = 0
    jitter_ms: int = 0
    per_frame: bool = False
    bytes_per_s: int = 0
    mid_frame: bool = False
    # bookkeeping (not part of a rule as written)
    source: str = "config"
    chosen: int = 0  # requests the rule was armed for
    fired: int = 0  # requests it fired in: what `times` counts
    auto_named: bool = False  # named after its action, so a clash gets a suffix, not an error

    @property
    def trigger(self) -> Trigger:
        return parse_trigger(self.at)

    def as_dict(self) -> dict:
        data = asdict(self)
        for key in ("chosen", "fired", "auto_named"):  # counters are in counters()
            data.pop(key)
        return {key: value for key, value in data.items() if value not in (None, {}, "")}

    def matches(self, route: str, path: str, model: str | None, session: str) -> bool:
        values = {"route": route, "path": path, "model": model or "", "session": session}
        return all(fnmatch.fnmatchcase(values[key], pattern)
                   for key, pattern in self.match.items())


    @property
    def spent(self) -> bool:
        return bool(self.times) and self.fired >= self.times

    def counters(self) -> dict:
        """What `fault list` shows besides the rule: how often it fired, what is left."""
        remaining = max(self.times - self.fired, 0) if self.times else None
        return {"fired": self.fired, "remaining": remaining, "spent": self.spent,
                "armed_for": self.chosen}


_BOOKKEEPING = ("source", "chosen", "fired", "auto_named")
_RULE_KEYS = tuple(f.name for f in fields(FaultRule) if f.name not in _BOOKKEEPING)
_INT_KEYS = ("times", "status", "duration_ms", "latency_ms", "jitter_ms", "bytes_per_s",
             "heartbeat_ms")
_BOOL_KEYS = ("per_frame", "mid_frame")


def _check_int(key: str, value: object) -> int:
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise FaultError(key, f"expected a whole number >= 0, got {value!r}")
    return value


def _check_bool(key: str, value: object) -> bool:
    if isinstance(value, str) and value.lower() in ("true", "false", "1", "0", "yes", "no"):
        return value.lower() in ("true", "1", "yes")
    if not isinstance(value, bool):
        raise FaultError(key, f"expected true or false, got {value!r}")
    return value


def rule_from_mapping(data: dict, source: str, default_name: str = "") -> FaultRule:
    """Validate one rule from any source; errors name the key at fault."""
    if not isinstance(data, dict):
        raise FaultError("rule", "expected a table/object of rule keys")
    for key in data:
        if key not in _RULE_KEYS:
            close = difflib.get_close_matches(key, _RULE_KEYS, n=1)
            hint = f"; did you mean `{close[0]}`?" if close else f"; keys: {', '.join(_RULE_KEYS)}"
            raise FaultError(key, f"unknown key{hint}")
    values = dict(data)
    action = values.get("action")
    if action not in ACTIONS:
        close = difflib.get_close_matches(str(action), ACTIONS, n=1)
        hint = f" (did you mean `{close[0]}`?)" if close else ""
        raise FaultError("action", f"expected one of {', '.join(ACTIONS)}, got {action!r}{hint}")
    auto_named = not values.get("name")
    name = values.get("name") or default_name or action
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise FaultError("name", f"use letters, digits, `_`, `.` or `-` (got {name!r})")
    values["name"] = name
    at = values.get("at") or DEFAULT_AT.get(action, "first_progress")
    if not isinstance(at, str):
        raise FaultError("at", f"expected a trigger string, got {at!r}")
    try:
        trigger = parse_trigger(at)
    except TriggerError as exc:
        raise FaultError("at", str(exc)) from None
    values["at"] = trigger.text
    if action == "http_error" and trigger.kind != "request":
        raise FaultError("at", "http_error answers instead of the upstream, so it fires at "
                               "`request`")
    if action == "drop_terminal" and trigger.kind != "terminal":
        raise FaultError("at", "drop_terminal removes the terminal event, so it fires at "
                               "`terminal`")
    if action == "hold" and trigger.kind != "terminal":
        raise FaultError("at", "hold keeps the connection open after the terminal event, so it "
                               "fires at `terminal`")
    match = values.get("match", {})
    if not isinstance(match, dict):
        raise FaultError("match", "expected a table of KEY = GLOB")
    for key, pattern in match.items():
        if key not in MATCH_KEYS:
            raise FaultError(f"match.{key}", f"match keys are {', '.join(MATCH_KEYS)}")
        if not isinstance(pattern, str):
            raise FaultError(f"match.{key}", f"expected a glob string, got {pattern!r}")
    probability = values.get("probability", 1.0)
    try:
        probability = float(probability)
    except (TypeError, ValueError):
        raise FaultError("probability", f"expected a number from 0 to 1, got {probability!r}")
    if not 0.0 <= probability <= 1.0:
        raise FaultError("probability", f"expected a number from 0 to 1, got {probability}")
    values["probability"] = probability
    if values.get("seed") is not None:
        values["seed"] = _check_int("seed", values["seed"])
    for key in _INT_KEYS:
        if key in values:
            values[key] = _check_int(key, values[key])
    for key in _BOOL_KEYS:
        if key in values:
            values[key] = _check_bool(key, values[key])
    if "times" not in values:
        values["times"] = 0 if source == "config" else 1
    if action == "http_error" and not 400 <= values.get("status", 500) <= 599:
        raise FaultError("status", f"expected an HTTP error status 400..599, got "
                                   f"{values['status']}")
    if values.get("style", "event") not in ("event", "wrapped"):
        raise FaultError("style", "expected `event` (the dialect's own error) or `wrapped`")
    if values.get("then", "close") not in ("close", "reset"):
        raise FaultError("then", "a stall ends with `close` or `reset`")
    if action == "throttle" and not values.get("bytes_per_s"):
        raise FaultError("bytes_per_s", "throttle needs bytes_per_s > 0")
    for key in ("type", "message", "retry_after"):
        if key in values and values[key] is not None and not isinstance(values[key], str):
            raise FaultError(key, f"expected a string, got {values[key]!r}")
    # `code` goes into the injected error frame as is: a table or a list there is no provider's.
    code = values.get("code")
    if code is not None and (isinstance(code, bool) or not isinstance(code, (str, int))):
        raise FaultError("code", f"expected a string or a whole number, got {code!r}")
    if values.get("body") is not None:
        values["body"] = _check_body(action, values)
    return FaultRule(**values, source=source, auto_named=auto_named)


def _check_body(action: str, values: dict) -> str:
    """`body`: JSON text (or, from TOML or the API, a table or list), returned as one compact
    line so that it fits in one SSE data line or NDJSON line. Like every action parameter it is
    ignored by the other actions; an error_chunk given both a body and the error's parts is
    refused, since it could send only one of them."""
    given = [key for key in ("type", "code", "message") if values.get(key) is not None]
    if action == "error_chunk" and (given or values.get("style", "event") != "event"):
        raise FaultError("body", "the body is the whole error frame: leave out "
                                 f"{', '.join(f'`{key}`' for key in given) or '`style`'}")
    body = values["body"]
    if isinstance(body, str):
        try:
            body = json.loads(body)
        except ValueError as exc:
            raise FaultError("body", f"expected JSON text, such as "
                                     f"'{{\"code\":\"InternalError\",\"message\":\"...\"}}' ({exc})"
                             ) from None
    elif not isinstance(body, (dict, list)):
        raise FaultError("body", f"expected JSON text or a table, got {body!r}")
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False)


def parse_fault_header(value: str) -> FaultRule:
    """`reset; at=event:tool_input_delta:5; times=1` -> a rule for this one request."""
    parts = [part.strip() for part in value.split(";") if part.strip()]
    if not parts:
        raise FaultError("x-streamtap-fault", "empty; expected `ACTION; key=value; ...`")
    data: dict = {"action": parts[0]}
    for part in parts[1:]:
        key, sep, item = part.partition("=")
        key = key.strip()
        if not sep:
            raise FaultError(key, "expected key=value")
        if key.startswith("match."):
            data.setdefault("match", {})[key[6:]] = item.strip()
        else:
            data[key] = item.strip()
    return rule_from_mapping(data, "header", default_name="header")


def check_route_match(rule: FaultRule, routes: Iterable[str]) -> None:
    """A `match.route` that names no configured route would never fire: refuse it, with the
    closest route name, so a typo is caught when the rule is armed rather than never noticed."""
    pattern = rule.match.get("route")
    routes = sorted(routes)
    if pattern is None or any(fnmatch.fnmatchcase(name, pattern) for name in routes):
        return
    close = difflib.get_close_matches(pattern, routes, n=1)
    hint = f"did you mean `{close[0]}`? " if close else ""
    raise FaultError("match.route", f"no route matches `{pattern}`; {hint}routes: "
                                    f"{', '.join(routes)}")


class FaultBook:
    """Every armed rule, and the choice of the rule for a request."""

    def __init__(self, config_rules: Iterable[FaultRule] = (), routes: Iterable[str] = ()):
        self.rules: dict[str, FaultRule] = {}
        self.routes = tuple(routes)
        self._random: dict[str, random.Random] = {}
        for rule in config_rules:
            self.add(rule)

    def add(self, rule: FaultRule, replace: bool = False) -> FaultRule:
        """Arm a rule. Names are unique: an auto-named rule gets a suffix (`error_chunk-2`), a
        rule named on purpose replaces its namesake only when asked to."""
        if self.routes:
            check_route_match(rule, self.routes)
        if rule.name in self.rules and not replace:
            if not rule.auto_named:
                raise FaultError("name", f"a rule named `{rule.name}` is already armed; pick "
                                         "another name (--name) or replace it (--replace)")
            n = 2
            while f"{rule.name}-{n}" in self.rules:
                n += 1
            rule.name = f"{rule.name}-{n}"
        self.rules[rule.name] = rule
        self._random[rule.name] = random.Random(rule.seed)
        return rule

    def remove(self, name: str) -> bool:
        self._random.pop(name, None)
        return self.rules.pop(name, None) is not None

    def clear(self) -> int:
        count = len(self.rules)
        self.rules.clear()
        self._random.clear()
        return count

    def listing(self) -> list[dict]:
        return [rule.as_dict() | rule.counters() for rule in self._ordered()]

    def armed(self) -> list[FaultRule]:
        """Rules that can still fire, in the order they are tried."""
        return [rule for rule in self._ordered() if not rule.spent]

    def _ordered(self) -> list[FaultRule]:
        return sorted(self.rules.values(), key=lambda rule: SOURCES.index(rule.source))

    def choose(self, header_rule: FaultRule | None, route: str, path: str, model: str | None,
               session: str) -> FaultRule | None:
        """The rule this request gets, if any. A matching rule draws its probability once per
        request. A rule is spent after `times` fires, not `times` requests: a request that never
        reaches the trigger leaves the rule armed for the next one."""
        if header_rule is not None:
            return header_rule
        for rule in self._ordered():
            if rule.spent:
                continue
            if not rule.matches(route, path, model, session):
                continue
            if rule.probability < 1.0 and self._random[rule.name].random() >= rule.probability:
                continue
            rule.chosen += 1
            return rule
        return None
