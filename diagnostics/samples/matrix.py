"""The cross-provider matrix: one row per provider and dialect, saying what its samples show.

Built only from sample fields that are content-free by construction (frame kinds, timing, shapes,
delta key names, terminal and error tokens), and every string that reaches a cell passes a token
check once more, so the matrix can be pasted into a design discussion as it is.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable

from streamtap.diagnostics.samples.format import streamed_dialect

_TOKEN = re.compile(r"[A-Za-z0-9_.:/\-\[\]]{1,64}")
_COMMENT = re.compile(r"[A-Za-z0-9 _.:\-]{1,40}")  # a keepalive comment (`OPENROUTER PROCESSING`)
_MARKER = "$"  # shape markers ($str, $obj, $text, $seq) are not names
_PROGRESS_TEXT = ("text_start", "text_delta", "text_end")
_REASONING = ("reasoning_start", "reasoning_delta")
_REASONING_WORDS = ("reason", "think", "thought")
_USAGE_KEYS = ("usage", "usageMetadata")
_USAGE_COUNTERS = ("eval_count", "prompt_eval_count")  # Ollama puts counts on the last line
COLUMNS = (("provider", "provider"), ("dialect", "dialect"), ("samples", "samples"),
           ("content_fields", "content fields"), ("reasoning", "reasoning travels in"),
           ("terminal", "terminal marker"), ("keepalive", "keepalive"),
           ("usage", "usage arrives"), ("errors", "error shapes"), ("endings", "endings"),
           ("ttfb_ms", "TTFB p50/p95"), ("first_progress_ms", "first progress p50/p95"),
           ("longest_silence_p95_ms", "longest silence p95"))


def _name(value: object, pattern: re.Pattern = _TOKEN) -> str | None:
    """A provider token fit for a cell, or None: markers and free text never reach the matrix."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str) and not value.startswith(_MARKER) and pattern.fullmatch(value):
        return value
    return None


def stream_dialect(sample: dict) -> str | None:
    """The dialect a sample's route streams. An HTTP error body (recorded as `json`) and a request
    that got no response (no dialect) belong to the stream the request asked for."""
    dialect = streamed_dialect(sample.get("dialect"), sample.get("status"),
                               sample.get("request") or {})
    return dialect or "json"


def percentile(values: list[float], p: float) -> float | None:
    """Nearest-rank percentile (no interpolation: with few samples it names a real one)."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(math.ceil(p / 100 * len(ordered)) - 1, 0)]


# -- reading shapes ---------------------------------------------------------------------------
def _shape(sample: dict, entry: list) -> dict | None:
    shapes = sample.get("shapes") or []
    index = entry[3] if len(entry) > 3 else None
    if isinstance(index, int) and 0 <= index < len(shapes) and isinstance(shapes[index], dict):
        return shapes[index]
    return None


def _keys(value: object, found: set[str]) -> set[str]:
    """Every key in a JSON skeleton whose value is not null or an empty string."""
    if isinstance(value, dict):
        for key, item in value.items():
            if item is not None and item != "":
                found.add(key)
            _keys(item, found)
    elif isinstance(value, list):
        for item in value:
            _keys(item, found)
    return found


def _type_tokens(value: object, found: set[str]) -> set[str]:
    """The kind names (`type` values) anywhere in a skeleton."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "type" and _name(item):
                found.add(item)  # type: ignore[arg-type]
            _type_tokens(item, found)
    elif isinstance(value, list):
        for item in value:
            _type_tokens(item, found)
    return found


def _frame_type(shape: dict) -> str | None:
    """The frame's own kind name: its SSE event, else its top-level `type`."""
    body = shape.get("json")
    own = body.get("type") if isinstance(body, dict) else None
    return _name(shape.get("event")) or _name(own)


def _usage_path(value: object, path: str = "") -> str | None:
    """Where a skeleton carries token usage (`usage`, `choices[].usage`, `usageMetadata`)."""
    if isinstance(value, dict):
        for key in _USAGE_KEYS:
            if isinstance(value.get(key), dict):
                return f"{path}{key}"
        if not path and any(isinstance(value.get(key), int) for key in _USAGE_COUNTERS):
            return "eval_count"
        for key, item in value.items():
            found = _usage_path(item, f"{path}{key}.")
            if found:
                return found
    elif isinstance(value, list) and value:
        return _usage_path(value[0], path[:-1] + "[].")
    return None


# -- what one sample shows --------------------------------------------------------------------
def _reasoning(sample: dict) -> set[str]:
    """Delta keys found only in reasoning frames, and the reasoning kind names those frames use."""
    delta_keys = set((sample.get("stream") or {}).get("delta_keys") or [])
    in_reasoning: set[str] = set()
    in_text: set[str] = set()
    found: set[str] = set()
    for entry in sample.get("frames") or []:
        shape = _shape(sample, entry)
        if shape is None:
            continue
        if entry[2] in _REASONING:
            _keys(shape.get("json"), in_reasoning)
            kinds = _type_tokens(shape.get("json"), set())
            own = _frame_type(shape)
            kinds |= {own} if own else set()
            found |= {kind for kind in kinds
                      if any(word in kind.lower() for word in _REASONING_WORDS)}
        elif entry[2] in _PROGRESS_TEXT:
            _keys(shape.get("json"), in_text)
    return found | ((in_reasoning - in_text) & delta_keys)


def _keepalives(sample: dict) -> tuple[set[str], list[float]]:
    """Keepalive styles (comment text or event name) and the gaps between keepalive frames."""
    styles: set[str] = set()
    times: list[float] = []
    for entry in sample.get("frames") or []:
        if entry[2] != "keepalive":
            continue
        times.append(entry[0])
        shape = _shape(sample, entry)
        if shape is None:
            styles.add("keepalive frames")
        elif "comment" in shape:
            text = _name(shape["comment"], _COMMENT)
            styles.add(f"comment `: {text}`" if text else "SSE comment")
        else:
            kind = _frame_type(shape)
            styles.add(f"`{kind}` event" if kind else "keepalive event")
    return styles, [b - a for a, b in zip(times, times[1:])]


def _usage(sample: dict) -> set[str]:
    """Where token usage arrives, named by frame position and the path inside the frame."""
    body = sample.get("body_shape")
    shapes = sample.get("shapes") or []
    if isinstance(body, int) and 0 <= body < len(shapes):
        path = _usage_path(shapes[body].get("json"))
        return {f"body (`{path}`)"} if path else set()
    carrying: list[tuple[int, list, str]] = []
    typeless = 0  # data frames that do not name their own kind (Chat, Gemini, Ollama chunks)
    finish_at = None
    frames = sample.get("frames") or []
    for position, entry in enumerate(frames):
        shape = _shape(sample, entry)
        if shape is None or not isinstance(shape.get("json"), (dict, list)):
            continue
        if entry[2] == "finish" and finish_at is None:
            finish_at = position
        # An error frame is the provider's error object, not one of its chunks.
        typeless += _frame_type(shape) is None and entry[2] != "error"
        path = _usage_path(shape["json"])
        if path:
            carrying.append((position, entry, path))
    found = set()
    plain = [path for _, entry, path in carrying if not _frame_type(_shape(sample, entry) or {})]
    if plain and len(plain) == typeless:
        found |= {f"every chunk (`{path}`)" for path in plain}
    for position, entry, path in carrying:
        own = _frame_type(_shape(sample, entry) or {})
        if own:
            where = f"`{own}`"
        elif plain and len(plain) == typeless:
            continue
        elif entry[2] == "finish":
            where = "finish chunk"
        elif finish_at is not None and position > finish_at:
            where = "chunk after finish"
        else:
            where = f"{entry[2]} chunk"
        found.add(f"{where} (`{path}`)")
    return found


def _kind(status: object, *names: object) -> str:
    """An error's type and code as cell text; a code that repeats the status adds nothing."""
    seen = []
    for value in names:
        name = _name(value)
        if name and name != str(status) and name not in seen:
            seen.append(name)
    return "".join(f" `{name}`" for name in seen)


def _errors(sample: dict) -> list[str]:
    seen = []
    error = sample.get("error") or {}
    status = sample.get("status")
    if status is not None and status >= 400:
        seen.append(f"HTTP {status}" + _kind(status, error.get("error_type"),
                                              error.get("error_code")))
    for item in (sample.get("stream") or {}).get("errors") or []:
        shape = _name(item.get("shape")) or "error"
        seen.append(shape + _kind(None, item.get("type"), item.get("code")))
    return seen


# -- the rows ---------------------------------------------------------------------------------
def _pair(values: list[float]) -> dict:
    p50, p95 = percentile(values, 50), percentile(values, 95)
    return {"p50": round(p50, 1) if p50 is not None else None,
            "p95": round(p95, 1) if p95 is not None else None, "n": len(values)}


def _counted(counter: Counter) -> dict:
    return dict(sorted(counter.items(), key=lambda item: (-item[1], item[0])))


def build_matrix(samples: Iterable[dict]) -> list[dict]:
    """One dict per (provider, dialect), sorted; see COLUMNS for what each field holds."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for sample in samples:
        key = (_name(sample.get("provider")) or "unknown",
               _name(stream_dialect(sample)) or "unknown")
        groups.setdefault(key, []).append(sample)
    rows = []
    for (provider, dialect), members in sorted(groups.items()):
        fields: list[str] = []
        reasoning: Counter = Counter()
        terminal: Counter = Counter()
        styles: Counter = Counter()
        gaps: list[float] = []
        usage: Counter = Counter()
        errors: Counter = Counter()
        endings: Counter = Counter()
        ttfb, progress, silence = [], [], []
        for sample in members:
            stream = sample.get("stream") or {}
            for key in stream.get("delta_keys") or []:
                if _name(key) and key not in fields:
                    fields.append(key)
            reasoning.update(_reasoning(sample))
            if _name(stream.get("terminal")):
                terminal[stream["terminal"]] += 1
            kinds, sample_gaps = _keepalives(sample)
            styles.update(kinds)
            gaps += sample_gaps
            usage.update(_usage(sample))
            errors.update(_errors(sample))
            endings[_name(sample.get("ending")) or "unknown"] += 1
            timing = sample.get("timing") or {}
            for values, name in ((ttfb, "first_byte_ms"), (progress, "first_progress_ms"),
                                 (silence, "max_gap_ms")):
                if values is silence and not sample.get("frames"):
                    continue  # a whole JSON body has no frames, so no silences between them
                if isinstance(timing.get(name), (int, float)):
                    values.append(float(timing[name]))
        period = percentile(gaps, 50)
        rows.append({
            "provider": provider, "dialect": dialect, "samples": len(members),
            "content_fields": fields,
            "reasoning": sorted(reasoning),
            "terminal": _counted(terminal),
            "keepalive": {"styles": sorted(styles),
                          "period_ms": round(period, 1) if period is not None else None},
            "usage": list(_counted(usage)),
            "errors": _counted(errors),
            "endings": _counted(endings),
            "ttfb_ms": _pair(ttfb),
            "first_progress_ms": _pair(progress),
            "longest_silence_p95_ms": _pair(silence)["p95"],
        })
    return rows


# -- markdown ---------------------------------------------------------------------------------
def _ms(value: float | None) -> str:
    return "–" if value is None else f"{value:.0f}"


def _code_list(items: Iterable[str]) -> str:
    return ", ".join(f"`{item}`" for item in items) or "–"


def _counts(counts: dict, code: bool = True) -> str:
    parts = []
    for name, count in counts.items():
        text = f"`{name}`" if code else name
        parts.append(text if count == 1 else f"{text} ×{count}")
    return ", ".join(parts) or "–"


def _cell(row: dict, column: str) -> str:
    value = row[column]
    if column in ("content_fields", "reasoning"):
        return _code_list(value)
    if column == "terminal":
        return _counts(value)
    if column in ("errors", "endings"):
        return _counts(value, code=column == "endings")
    if column == "usage":
        return ", ".join(value) or "–"
    if column == "keepalive":
        styles = ", ".join(value["styles"]) or "none seen"
        period = value["period_ms"]
        return styles + (f", every ~{period:.0f} ms" if period is not None else "")
    if column in ("ttfb_ms", "first_progress_ms"):
        return f"{_ms(value['p50'])} / {_ms(value['p95'])} ms" if value["n"] else "–"
    if column == "longest_silence_p95_ms":
        return f"{_ms(value)} ms" if value is not None else "–"
    return str(value)


def render_markdown(rows: list[dict]) -> str:
    """The matrix as a GitHub markdown table."""
    lines = ["| " + " | ".join(title for _, title in COLUMNS) + " |",
             "|" + "---|" * len(COLUMNS)]
    for row in rows:
        cells = [_cell(row, column).replace("|", "\\|") for column, _ in COLUMNS]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
