"""When a fault fires: the `at` trigger language, and a scanner that finds the firing frame.

`at` is one of `request`, `headers`, `first_progress`, `event:<kind>:<n>` (after the n-th
normalized event of that kind), `events:<n>` (after n frames, keepalives not counted),
`bytes:<n>`, `ms:<n>` (since the first byte) and `terminal` (instead of the terminal event).
The scanner reads the stream with the dialect, like the recorder does, and reports where in the
byte stream the trigger fired, so the proxy can cut on a frame boundary (or mid-frame if asked).
"""

from __future__ import annotations

from dataclasses import dataclass

from streamtap.diagnostics.dialects import events as ev
from streamtap.diagnostics.dialects.base import Dialect, frame_decoder
from streamtap.diagnostics.decode.sse import DEFAULT_MAX_LINE
from streamtap.diagnostics.dialects.stream import StreamState
from streamtap.diagnostics.errors import UserError

BEFORE_BODY = ("request", "headers")
TRIGGER_HELP = ("request, headers, first_progress, terminal, event:<kind>:<n>, events:<n>, "
                "bytes:<n>, ms:<n>")


class TriggerError(UserError, ValueError):
    pass


@dataclass(frozen=True)
class Trigger:
    kind: str  # request | headers | first_progress | terminal | event | events | bytes | ms
    event: str | None = None
    n: int = 0

    @property
    def text(self) -> str:
        if self.kind == "event":
            return f"event:{self.event}:{self.n}"
        if self.kind in ("events", "bytes", "ms"):
            return f"{self.kind}:{self.n}"
        return self.kind

    @property
    def before_body(self) -> bool:
        return self.kind in BEFORE_BODY


def parse_trigger(text: str) -> Trigger:
    """Parse `at`; a bad value raises TriggerError saying what is accepted."""
    text = text.strip()
    if text in ("request", "headers", "first_progress", "terminal"):
        return Trigger(text)
    parts = text.split(":")
    try:
        if parts[0] == "event" and len(parts) == 3:
            if parts[1] not in ev.EVENT_KINDS:
                raise TriggerError(f"unknown event kind `{parts[1]}` in `{text}`; kinds: "
                                   f"{', '.join(ev.EVENT_KINDS)}")
            n = int(parts[2])
            if n < 1:
                raise TriggerError(f"`{text}`: the count starts at 1")
            return Trigger("event", parts[1], n)
        if parts[0] in ("events", "bytes", "ms") and len(parts) == 2:
            n = int(parts[1])
            if n < (1 if parts[0] == "events" else 0):
                raise TriggerError(f"`{text}`: the number must be positive")
            return Trigger(parts[0], None, n)
    except ValueError as exc:
        if isinstance(exc, TriggerError):
            raise
        raise TriggerError(f"`{text}`: expected a whole number after the colon") from None
    raise TriggerError(f"unknown trigger `{text}`; expected one of {TRIGGER_HELP}")


class FrameScanner:
    """Reads a stream with its dialect, like the recorder does, and finds where a trigger fires.

    Offsets are positions in the (decoded) byte stream: a frame ends where the sum of the sizes
    of the frames before it, and it, says. `cut` is where the stream must be cut, once known.
    """

    def __init__(self, dialect_class: type[Dialect], trigger: Trigger, mid_frame: bool = False,
                 max_line: int = DEFAULT_MAX_LINE):
        self.trigger = trigger
        self.mid_frame = mid_frame
        self.state = StreamState()
        self.dialect = dialect_class(self.state)
        # The same limits as the recorder's decoder: an oversized frame is read by neither.
        self.decoder = frame_decoder(dialect_class.framing, max_line)
        self.fed = 0  # bytes fed
        self.offset = 0  # end of the last complete frame
        self.frames = 0  # complete frames, keepalives not counted
        self.cut: int | None = None  # where to cut, once the trigger fired
        self.skip_to: int | None = None  # drop_terminal: where the dropped frame ends
        self.frames_before = 0  # frames (keepalives included) wholly before the cut
        self._all_frames = 0

    def feed(self, chunk: bytes, t_ms: float, since_first_byte_ms: float) -> int | None:
        """Feed one chunk; return the cut offset if the trigger has fired (now or before)."""
        trigger = self.trigger
        self.fed += len(chunk)
        if self.decoder is None:
            if self.cut is None and trigger.kind == "bytes" and self.fed >= trigger.n:
                self.cut = trigger.n
            return self.cut
        state = self.state
        for frame in self.decoder.feed(chunk):
            start = self.offset
            self.offset += frame.size
            self._all_frames += 1
            progress_before = state.first_progress_ms is not None
            had_terminal = state.terminal is not None
            if frame.comment:
                state.emit(ev.KEEPALIVE, t_ms)
                keepalive = True
            elif frame.oversized:  # its data was not kept: a frame, but nothing to read in it
                keepalive = False
                self.frames += 1
            else:
                kind = self.dialect.on_frame(frame, t_ms)
                keepalive = kind == ev.KEEPALIVE
                if not keepalive:
                    self.frames += 1
            if self.cut is not None:
                continue
            if trigger.kind == "terminal":
                if not had_terminal and state.terminal is not None:
                    self.cut, self.skip_to = start, self.offset
            elif trigger.kind == "ms":
                if since_first_byte_ms >= trigger.n:
                    self.cut = start
            elif self._fires_after(trigger, progress_before, keepalive):
                self.cut = self.offset
                if self.mid_frame:
                    self.cut = start + max(1, (self.offset - start) // 2)
            if self.cut is not None:
                whole = self.cut == self.offset
                self.frames_before = self._all_frames if whole else self._all_frames - 1
        if (self.cut is None and trigger.kind == "bytes" and self.mid_frame
                and self.fed >= trigger.n):
            self.cut = trigger.n
        return self.cut

    def _fires_after(self, trigger: Trigger, progress_before: bool, keepalive: bool) -> bool:
        state = self.state
        if trigger.kind == "first_progress":
            return not progress_before and state.first_progress_ms is not None
        if trigger.kind == "event":
            return state.event_counts.get(trigger.event or "", 0) >= trigger.n
        if trigger.kind == "events":
            return self.frames >= trigger.n and not keepalive
        if trigger.kind == "bytes":
            return not self.mid_frame and self.offset >= trigger.n
        return False
