"""What the outcome says to the world outside streamtap, added to the verdict: what the client
will make of the ending (`client_sees`, and a sentence when it was not told), and the finish
reason in one vocabulary next to the provider's own.

Both are functions of the verdict and the stream facts alone, so a reader can also derive them
for a record written before they were kept.
"""

from __future__ import annotations

from streamtap.diagnostics.verdict import client_sees as cs
from streamtap.diagnostics.verdict import finish_reasons


def client_fields(outcome: dict, dialect: str | None, finish_reason: str | None,
                  tool_called: bool) -> dict:
    """`client_sees` and `normalized_finish_reason` of an outcome that may lack them. Both are
    one of a few fixed words (client_sees.VALUES, finish_reasons.VALUES) or None: never text from
    the stream, so neither can hold a secret or content."""
    sees = outcome.get("client_sees")
    if sees not in cs.VALUES:
        sees = cs.judge(outcome.get("boundary"), outcome.get("evidence") or ())
    reason = outcome.get("normalized_finish_reason")
    if "normalized_finish_reason" not in outcome:
        reason = finish_reasons.normalized(outcome, sees, dialect, finish_reason, tool_called)
    return {"client_sees": sees, "normalized_finish_reason": reason}


def with_client_view(outcome: dict, dialect: str | None, finish_reason: str | None,
                     tool_called: bool) -> dict:
    """The outcome with client_fields() set and, when the client was not told, the summary
    saying so."""
    fields = client_fields(outcome, dialect, finish_reason, tool_called)
    sentence = cs.SENTENCES.get(fields["client_sees"])
    summary = outcome["summary"] + (" " + sentence if sentence else "")
    return {**outcome, "summary": summary, **fields}
