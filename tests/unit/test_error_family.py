"""streamtap's own errors are one family that says whose fault each is (diagnostics/errors.py),
and each still has the builtin base it had, so no `except ValueError` anywhere changed meaning."""

import pytest

from streamtap.diagnostics import errors
from streamtap.diagnostics.faults.rules import FaultError
from streamtap.diagnostics.faults.triggers import TriggerError
from streamtap.diagnostics.probe.baseline import BaselineError
from streamtap.diagnostics.probe.catalog import CatalogError
from streamtap.diagnostics.probe.grade import PinError
from streamtap.diagnostics.record.schema import RecordVersionError
from streamtap.diagnostics.samples.repro import ReproError
from streamtap.diagnostics.samples.format import SampleError
from streamtap.diagnostics.samples.scripted import ScriptError
from streamtap.diagnostics.views.spans import SpanError
from streamtap.proxy.config import ConfigError
from streamtap.proxy.export.otlp import ExportUnavailable
from streamtap.proxy.faults.client import ControlError
from streamtap.proxy.probe.run import ProbeError
from streamtap.proxy.readout.follow import FollowError
from streamtap.proxy.readout.tracedir import TraceError
from streamtap.proxy.replay.playable import ReplayError
from streamtap.proxy.replay.sample_files import ExportError
from streamtap.proxy.serve.guard import ControlRequestError

# (class, the builtin base it always had, whose fault it is)
FAMILY = [
    (ConfigError, ValueError, errors.USER), (TraceError, ValueError, errors.USER),
    (ExportError, ValueError, errors.USER), (ExportUnavailable, RuntimeError, errors.USER),
    (FollowError, RuntimeError, errors.UPSTREAM), (ControlError, RuntimeError, errors.UPSTREAM),
    (ControlRequestError, Exception, errors.USER), (ReplayError, Exception, errors.USER),
    (ProbeError, RuntimeError, errors.USER), (PinError, ValueError, errors.USER),
    (BaselineError, ValueError, errors.USER), (CatalogError, ValueError, errors.USER),
    (SpanError, ValueError, errors.USER), (FaultError, ValueError, errors.USER),
    (TriggerError, ValueError, errors.USER), (RecordVersionError, ValueError, errors.USER),
    (SampleError, ValueError, errors.USER), (ScriptError, ValueError, errors.USER),
    (ReproError, ValueError, errors.USER),
]


@pytest.mark.parametrize("cls, builtin, fault", FAMILY, ids=[c.__name__ for c, _, _ in FAMILY])
def test_each_error_is_of_the_family_and_keeps_its_builtin_base(cls, builtin, fault):
    assert issubclass(cls, errors.StreamtapError) and issubclass(cls, builtin)
    assert cls.fault == fault


def test_the_three_sides():
    assert errors.UserError.fault == "user"
    assert errors.UpstreamError.fault == "upstream"
    assert errors.StreamtapBug.fault == errors.StreamtapError.fault == "streamtap"
    # the family adds a base; it never turns a ValueError into something `except ValueError`
    # stops catching, nor makes a RuntimeError one
    assert not issubclass(errors.StreamtapError, (ValueError, RuntimeError))


# -- the command line turns any of them into one line and an exit status, in one place ---------
def test_the_cli_says_a_users_mistake_in_one_line_and_exits_2(tmp_path, capsys):
    from streamtap.proxy.cli import main

    assert main(["ls", "--trace-dir", str(tmp_path / "nope")]) == 2
    assert capsys.readouterr().err == (f"streamtap: trace dir {tmp_path / 'nope'} does not exist; "
                                       "pass --trace-dir DIR, the folder `streamtap serve` "
                                       "writes to (default ./streamtap-traces)\n")
    assert main(["stats", "--trace-dir", str(tmp_path), "--since", "soon"]) == 2
    assert "streamtap: --since 'soon' is neither a duration" in capsys.readouterr().err
    assert main(["serve", "--port", "1", "--idle-timeout-ms", "-1"]) == 2
    assert capsys.readouterr().err == ("streamtap: config error at `--idle-timeout-ms`: must be "
                                       "0 or more, got -1\n")
    assert main(["probe", "--timeout", "0", "--", "true"]) == 2
    assert "streamtap: config error at `--timeout`: must be more than 0" in capsys.readouterr().err


@pytest.mark.parametrize("error, status, lines", [
    (errors.UserError("bad flag"), 2, ["streamtap: bad flag"]),
    (errors.UpstreamError("no answer"), 1, ["streamtap: no answer"]),
    (errors.StreamtapBug("broke"), 1, ["streamtap: broke", "streamtap: this is a bug in streamtap"]),
])
def test_whose_fault_sets_the_exit_status_and_a_bug_asks_for_a_report(error, status, lines,
                                                                        capsys):
    import argparse

    from streamtap.proxy.cli import explain

    assert explain(error, argparse.Namespace()) == status
    said = capsys.readouterr().err.splitlines()
    assert len(said) == len(lines) and all(s.startswith(l) for s, l in zip(said, lines))
    # a command that has always exited 1 for its errors (fault) keeps its status
    assert explain(error, argparse.Namespace(error_status=1)) == 1
