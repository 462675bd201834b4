"""Grades: what a client did about one ending, from facts the probe observed (exit status,
whether it was killed at the limit, and for each request whether the wire completed), and
whether that meets the catalog's expectation or a team's pinned grade."""

from __future__ import annotations

from dataclasses import dataclass, field

from streamtap.diagnostics.probe.catalog import (GRADES, HUNG, OK, RAISED, RECOVERED, SILENT,
                                                 CatalogRow)
from streamtap.diagnostics.errors import UserError


@dataclass(frozen=True)
class Attempt:
    """One request of a run, from its trace record: when it started (seconds since the run
    began) and whether its stream completed at the wire (phase `complete`)."""

    started_s: float
    complete: bool
    trace_id: str = ""  # the record's id: streamtap's own hex, never the client's words
    fault_fired: bool = True  # whether the ending's fault fired in this request


@dataclass(frozen=True)
class Run:
    """What the probe saw of one run of the client."""

    exit_status: int | None  # None when it was killed at the limit
    killed: bool
    seconds: float
    attempts: tuple[Attempt, ...] = ()
    # The client's last error line: its own stderr, scrubbed of keys and cut to one short line;
    # the only answers it could quote come from the fake provider (filler words), never a user's.
    error_line: str = ""


def grade(run: Run) -> str:
    """`HUNG` killed at the limit; `raised` failed and said so; with exit 0: `ok` when every
    request completed at the wire, `recovered` when a later one did after a failed one, and
    `SILENT` when none did."""
    if run.killed:
        return HUNG
    if run.exit_status != 0:
        return RAISED
    completed = [attempt.complete for attempt in run.attempts]
    if completed and all(completed):
        return OK
    if any(completed):
        return RECOVERED
    return SILENT


@dataclass(frozen=True)
class Verdict:
    """One ending's line of the probe's result. `skipped` says why it was not run."""

    ending: str
    grade: str | None
    meets: bool
    why: str
    run: Run | None = None
    skipped: str | None = None
    pinned: tuple[str, ...] = field(default=())

    @property
    def requests(self) -> int:
        return len(self.run.attempts) if self.run else 0

    def as_dict(self) -> dict:
        """The JSON form (`--format json`, the session's probe.jsonl). Its strings are the
        catalog's names and words, our grades, trace ids, and the client's error line (scrubbed,
        see Run): none is a secret or a user's content."""
        run = self.run
        return {"ending": self.ending, "grade": self.grade, "meets": self.meets, "why": self.why,
                "skipped": self.skipped, "requests": self.requests,
                "seconds": round(run.seconds, 2) if run else None,
                "exit_status": run.exit_status if run else None,
                "error_line": run.error_line if run else "",
                "traces": [attempt.trace_id for attempt in run.attempts] if run else []}


def _retried_after(run: Run, wait_s: float) -> str | None:
    """Why the retries of a 429 broke its retry-after, or None."""
    starts = [attempt.started_s for attempt in run.attempts]
    if len(starts) < 2:
        return "not retried"
    # A little slack: the record's start is taken after the request arrived.
    early = [b - a for a, b in zip(starts, starts[1:]) if b - a < wait_s * 0.9]
    if early:
        return f"retried after {min(early):.2f} s, before retry-after ({wait_s:g} s)"
    return None


def judge(ending: CatalogRow, run: Run, pinned: tuple[str, ...] = ()) -> Verdict:
    """The grade of `run` and whether it meets the expectation: the grades a team pinned for
    this ending when it pinned any, else the catalog's."""
    got = grade(run)
    if run.attempts and not any(attempt.fault_fired for attempt in run.attempts):
        # The client never reached the point where the ending happens (a reply that is not a
        # stream, fewer text deltas): nothing about the ending to grade it on.
        return Verdict(ending.name, got, True, "not reached: the fault never fired in the "
                       "client's requests", run, pinned=pinned)
    if pinned:
        meets = got in pinned
        why = "as pinned" if meets else f"pinned {' or '.join(pinned)}, got {got}"
        return Verdict(ending.name, got, meets, why, run, pinned=pinned)
    expect = ending.expect
    if got not in expect.accept:
        return Verdict(ending.name, got, False, f"breaks: {expect.says}", run)
    if expect.retry_wait_s is not None:
        problem = _retried_after(run, expect.retry_wait_s)
        if problem:
            return Verdict(ending.name, got, False, f"breaks: {expect.says} ({problem})", run)
    return Verdict(ending.name, got, True, expect.says, run)


def skipped(ending: CatalogRow, reason: str) -> Verdict:
    return Verdict(ending.name, None, True, "", skipped=reason)


class PinError(UserError, ValueError):
    """An --expect file that cannot be read as pinned grades; says what is wrong."""


def pinned_grades(data: object) -> dict[str, tuple[str, ...]]:
    """Pinned grades from the JSON `--format json` prints, or a subset of it: `{"endings":
    [{"ending": NAME, "grade": GRADE or [GRADES]}, ...]}`. Rows without a grade (skipped) pin
    nothing."""
    rows = data.get("endings") if isinstance(data, dict) else None
    if not isinstance(rows, list):
        raise PinError('expected an object with "endings": [{"ending": ..., "grade": ...}], '
                       "as `streamtap probe --format json` prints")
    pins: dict[str, tuple[str, ...]] = {}
    for index, row in enumerate(rows):
        if not isinstance(row, dict) or not isinstance(row.get("ending"), str):
            raise PinError(f'endings[{index}]: expected {{"ending": NAME, "grade": GRADE}}')
        value = row.get("grade")
        if value is None:
            continue
        grades = tuple(value) if isinstance(value, list) else (value,)
        for one in grades:
            if one not in GRADES:
                raise PinError(f"endings[{index}] ({row['ending']}): unknown grade {one!r}; "
                               f"grades: {', '.join(GRADES)}")
        pins[row["ending"]] = grades
    return pins
