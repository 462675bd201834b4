"""Which dialect an SSE stream speaks when neither its route nor its path says: its first frames
tell. Each provider's opening frame is distinctive:

| first frame                                                   | dialect              |
|---------------------------------------------------------------|----------------------|
| event `message_start`, or `"type": "message_start"`           | `anthropic-messages` |
| event `response.*`, or `"type": "response.*"`                 | `openai-responses`   |
| an object with a `choices` list, or `chat.completion.chunk`   | `openai-chat`        |
| an object with `candidates` or `promptFeedback`               | `gemini`             |

Until a frame decides, frames are read as plain `sse` (keepalives, `[DONE]`, a gateway's error
chunk); after `SNIFF_FRAMES` data frames that decide nothing, the stream stays `sse`.
"""

from __future__ import annotations

import json

from streamtap.diagnostics.decode.sse import Frame
from streamtap.diagnostics.dialects.base import Dialect, GenericSse
from streamtap.diagnostics.dialects.registry import dialect_class
from streamtap.diagnostics.dialects.stream import StreamState

SNIFF_FRAMES = 8
# The sniffer decodes at most this much of a frame: an opening frame is small.
MAX_SNIFF_BYTES = 64 * 1024


def sniff_frame(frame: Frame) -> str | None:
    """The dialect one SSE frame proves, or None if it proves none."""
    name = frame.event
    if name == "message_start":
        return "anthropic-messages"
    if name and name.startswith("response."):
        return "openai-responses"
    data = frame.data.strip()
    if data[:1] != b"{" or len(data) > MAX_SNIFF_BYTES:
        return None
    try:
        obj = json.loads(data)
    except ValueError:
        return None
    if not isinstance(obj, dict):
        return None
    kind = obj.get("type")
    if kind == "message_start":
        return "anthropic-messages"
    if isinstance(kind, str) and kind.startswith("response."):
        return "openai-responses"
    if isinstance(obj.get("choices"), list) or obj.get("object") == "chat.completion.chunk":
        return "openai-chat"
    if isinstance(obj.get("candidates"), list) or isinstance(obj.get("promptFeedback"), dict):
        return "gemini"
    return None


class SniffingSse(Dialect):
    """Plain `sse` until a frame names the dialect; from that frame on, that dialect (sharing
    the same state, so the frames before it still count)."""

    terminal_names = GenericSse.terminal_names

    def __init__(self, state: StreamState):
        super().__init__(state)
        self._inner: Dialect = GenericSse(state)
        self.sniffed: str | None = None  # the dialect the frames proved, once they did
        self._undecided = 0

    @property
    def name(self) -> str:  # type: ignore[override]
        return self._inner.name

    def on_frame(self, frame: Frame, t_ms: float) -> str:
        if self.sniffed is None and self._undecided < SNIFF_FRAMES:
            found = sniff_frame(frame)
            if found is None:
                self._undecided += 1
            else:
                self._inner = dialect_class(found)(self.state)
                self.sniffed = found
        return self._inner.on_frame(frame, t_ms)

    def on_end(self, t_ms: float) -> None:
        self._inner.on_end(t_ms)
