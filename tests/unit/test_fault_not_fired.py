"""An armed rule that did not fire is said, with why: its trigger never came, another request
used its last fire, or a frame outgrew what may be held back."""

from __future__ import annotations

import pytest

from streamtap.diagnostics.verdict.classify import Facts, classify

RULE = {"name": "cut", "action": "reset", "at": "event:text_delta:5", "fired": False}


def outcome(fault: dict | None) -> dict:
    return classify(Facts(provider="openai", dialect="openai-chat", status=200, error=None,
                          upstream="complete", downstream="complete", watchdog_fired=None,
                          watchdog={}, shutdown=False, proxy_reason=None, fault=fault,
                          terminal="[DONE]", dialect_has_terminal=True, finish_reason="stop",
                          stream_errors=[], phase="after_finish", event_counts={},
                          frame_count=7))


@pytest.mark.parametrize("fallback, said", [
    (None, "Fault rule `cut` was armed for this request but its trigger `event:text_delta:5` "
           "was never reached, so it did not fire."),
    ("rule_spent_by_a_concurrent_request",
     "Fault rule `cut` was armed for this request, but another request running at the same "
     "time used its last fire (`times`) first, so it did not fire here."),
    ("frame_too_large_forwarded_unbuffered",
     "Fault rule `cut` was armed for this request, but a frame grew past what streamtap holds "
     "back (max_line_bytes), so it forwarded the rest unbuffered and did not fire."),
])
def test_a_rule_that_did_not_fire_says_why(fallback, said):
    fault = RULE | ({"fallback": fallback} if fallback else {})
    verdict = outcome(fault)
    assert verdict["ok"] is True and verdict["boundary"] == "none"
    assert verdict["summary"].endswith(" " + said)
    assert verdict["evidence"][-1] == "fault_armed_not_fired"


def test_no_rule_adds_nothing():
    plain = outcome(None)
    assert "Fault rule" not in plain["summary"]
    assert "fault_armed_not_fired" not in plain["evidence"]
