"""The verdict table is data: its order is the tuple classify.RULES, the first row whose condition
holds decides, and every condition is a pure function of the Facts.

test_classify_table.py pins what each row says; this file pins how the table is read.
"""

from __future__ import annotations

import copy
import inspect
import time
import types
from dataclasses import FrozenInstanceError

import msgspec
import pytest

from streamtap.diagnostics.verdict import classify as cl
from streamtap.diagnostics.verdict import columns, conditions, sentences
from streamtap.diagnostics.verdict.classify import RULES, Rule, classify
from tests.unit.test_classify_table import OPEN, ROWS, facts

CASES = [given for given, _ in ROWS.values()]


def swapped(table: tuple[Rule, ...], first: Rule, second: Rule) -> tuple[Rule, ...]:
    """The table with two rows trading places."""
    i, j = table.index(first), table.index(second)
    rows = list(table)
    rows[i], rows[j] = rows[j], rows[i]
    return tuple(rows)


def holding(given) -> list[Rule]:
    return [row for row in RULES if row.when(given)]


def test_the_table_is_one_tuple_in_this_order():
    """The order is the decision: moving a row changes verdicts, so it shows here too."""
    assert isinstance(RULES, tuple) and all(isinstance(row, Rule) for row in RULES)
    assert [row.name for row in RULES] == [
        "injected_fault", "forced_shutdown", "proxy_shutdown", "proxy_answered",
        "watchdog_fired", "client_went_away", "could_not_connect", "http_error_status",
        "error_in_unknown_shape", "error_inside_stream", "upstream_broke",
        "stream_answered_with_json", "completed_with_terminal", "no_dialect_to_judge",
        "closed_without_terminal"]


def test_a_row_names_its_condition_and_its_sentence_and_cannot_change():
    for row in RULES:
        assert row.when is getattr(conditions, row.name)
        assert row.says is getattr(sentences, row.name)  # the sentence of the same name
    with pytest.raises(FrozenInstanceError):
        RULES[0].boundary = "none"


def test_the_first_row_that_holds_decides():
    """A second stop signal during a shutdown: both shutdown rows hold, the upper one speaks,
    and with the two rows swapped the other one does."""
    given = facts(**OPEN, phase="text", shutdown=True, shutdown_forced=True)
    forced, graceful = cl.RULES[1], cl.RULES[2]
    assert (forced.name, graceful.name) == ("forced_shutdown", "proxy_shutdown")
    assert holding(given)[:2] == [forced, graceful]
    assert classify(given)["evidence"] == ["shutdown_forced"]
    assert classify(given, swapped(RULES, forced, graceful))["evidence"] == ["proxy_shutdown"]


def test_a_client_that_left_outranks_the_reset_it_caused():
    given = facts(**OPEN, phase="text", downstream="client_gone", upstream="reset")
    client, upstream = (next(row for row in RULES if row.name == name)
                        for name in ("client_went_away", "upstream_broke"))
    assert classify(given)["boundary"] == "client_abort"
    assert classify(given, swapped(RULES, client, upstream))["boundary"] == "transport"


def overlapping_cases() -> list[tuple[str, Rule, Rule]]:
    """Every case of the table test where more than one row holds: (case, the row that decides,
    the next row that holds too, other than the last row when there is one)."""
    found = []
    for name, given in zip(ROWS, CASES):
        rows = holding(given)
        if len(rows) > 1:
            found.append((name, rows[0], rows[1] if len(rows) == 2 else rows[-2]))
    return found


def test_the_cases_overlap_between_rows_not_only_with_the_last():
    """The last row always holds, so every case overlaps with it; the order matters most where
    two real rows overlap, and the table test's cases must keep covering those."""
    pairs = {(first.name, second.name) for _, first, second in overlapping_cases()
             if second is not RULES[-1]}
    assert pairs >= {("injected_fault", "http_error_status"),
                     ("client_went_away", "completed_with_terminal"),
                     ("could_not_connect", "upstream_broke"),
                     ("error_in_unknown_shape", "error_inside_stream"),
                     ("error_inside_stream", "upstream_broke"),
                     ("stream_answered_with_json", "completed_with_terminal")}, pairs


# Parametrized by case alone: which rows hold is computed in the test, so that a change of the
# conditions fails the test rather than renaming it.
@pytest.mark.parametrize("case", list(ROWS))
def test_swapping_two_rows_that_hold_changes_the_verdict(case):
    overlap = {name: (first, second) for name, first, second in overlapping_cases()}
    if case not in overlap:
        assert holding(ROWS[case][0]) == [RULES[-1]]  # only the last row: nothing to swap
        return
    given, (first, second) = ROWS[case][0], overlap[case]
    assert classify(given) == classify(given, (first,))  # the first row's verdict, no other's
    moved = classify(given, swapped(RULES, first, second))
    assert moved == classify(given, (second,))
    assert moved != classify(given)


def test_the_last_row_always_holds():
    last = RULES[-1]
    assert all(last.when(given) is True for given in CASES)
    assert last.when(facts()) is True  # a complete stream too: only the rows above exclude it


# -- conditions (and the columns read from the facts) are pure functions of the Facts --------
FACT_FUNCTIONS = sorted({(row.name, column) for row in RULES
                         for column in (row.when, row.phase, row.evidence, row.retryable,
                                        row.silence_from) if callable(column)},
                        key=lambda pair: (pair[0], pair[1].__name__))
IMMUTABLE = (str, int, float, bool, tuple, frozenset, type(None))


def pure_streamtap(value) -> bool:
    """A value a pure function may read from its module: a constant, or a module or function of
    diagnostics/ (pure by its layer; tests/unit/test_layers.py)."""
    if isinstance(value, IMMUTABLE):
        return not isinstance(value, (tuple, frozenset)) or all(map(pure_streamtap, value))
    if isinstance(value, types.ModuleType):
        return value.__name__.startswith("streamtap.diagnostics.")
    if isinstance(value, types.FunctionType):
        return value.__module__.startswith("streamtap.diagnostics.")
    if isinstance(value, msgspec.Struct) and type(value).__struct_config__.frozen:
        return type(value).__module__.startswith("streamtap.diagnostics.")  # a record constant
    return False


@pytest.mark.parametrize("row, function", FACT_FUNCTIONS,
                         ids=lambda value: getattr(value, "__name__", value))
def test_a_condition_or_column_reads_nothing_but_the_facts(row, function):
    """One parameter, the Facts, and no global that could change between calls: no mutable
    module state, no clock, no I/O."""
    assert list(inspect.signature(function).parameters) == ["f"]
    names = inspect.getclosurevars(function)
    assert names.nonlocals == {}
    impure = {name: value for name, value in names.globals.items() if not pure_streamtap(value)}
    assert impure == {}, f"{row}: {function.__name__} reads {impure}"
    # `type` is also an error's attribute (`first.type`), which getclosurevars cannot tell from
    # the builtin; the builtin would be pure too.
    assert set(names.builtins) <= {"bool", "str", "any", "len", "type"}


@pytest.mark.parametrize("row", RULES, ids=lambda row: row.name)
def test_a_condition_answers_yes_or_no_and_changes_nothing(row):
    for given in CASES:
        before = copy.deepcopy(given)
        answer = row.when(given)
        assert answer is True or answer is False, (row.name, answer)
        assert given == before  # the facts are read, never written
        assert row.when(before) is answer  # equal facts, same answer: nothing else is read


def test_the_columns_read_the_facts_the_same_way_twice():
    for given in CASES:
        for row in holding(given)[:1]:
            before = copy.deepcopy(given)
            assert row.verdict(given) == row.verdict(before)
            assert given == before


def test_the_purity_check_sees_mutable_state_clocks_and_io():
    assert not pure_streamtap([]) and not pure_streamtap({}) and not pure_streamtap(("a", []))
    assert not pure_streamtap(time) and not pure_streamtap(time.monotonic)
    assert not pure_streamtap(open)
    assert pure_streamtap(conditions.ANSWER_KEEPING_FAULTS) and pure_streamtap(columns.stream_phase)
