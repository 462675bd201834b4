"""Mutation testing of the modules that decide what a user is told.

    .venv/bin/python bench/mutate.py --module diagnostics/verdict/classify.py [--budget 600]

For each module: every comparison flipped, every constant nudged, every `return X` emptied, every
`and`/`or` swapped and every `not` dropped, one at a time. The tests are run once under coverage
with one context per test, so each mutant runs only the tests that reach its statement. A mutant
lives only in memory, in a forked child that swaps the mutated code object into the imported
function: the worktree is never written. Equivalent mutants are read from
`bench/mutation_equivalents.toml` and listed with their reason, not counted.

Why not a maintained tool: mutmut 3 skips decorated functions (the rules of classify.py were
decorated with `@rule` when this was chosen) and cosmic-ray runs the whole test command for every
mutant (no per-test selection from coverage), which is hours on this suite.

Limit: tests that drive a proxy *subprocess* cannot see an in-memory mutant, so they are not
used; a verdict must be pinned by a test that runs the code in the test process.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import importlib
import importlib.util
import inspect
import io
import json
import os
import re
import signal
import sys
import time
import tomllib
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

from mutants import (Mutant, apply_mutant, find_mutants, import_mutated, import_time,
                     module_name, readers, uses)

REPO = Path(__file__).resolve().parent.parent
EQUIVALENTS = REPO / "bench" / "mutation_equivalents.toml"
VERDICT_MODULES = (
    "diagnostics/verdict/classify.py", "diagnostics/verdict/conditions.py",
    "diagnostics/verdict/columns.py", "diagnostics/verdict/sentences.py",
    "diagnostics/dialects/stream.py",
    "diagnostics/redaction/redact.py", "diagnostics/redaction/secrets.py",
    "diagnostics/decode/sse.py", "diagnostics/faults/triggers.py", "diagnostics/faults/rules.py",
    "diagnostics/dialects/openai_chat.py", "diagnostics/dialects/openai_responses.py",
    "diagnostics/dialects/anthropic_messages.py", "diagnostics/dialects/gemini.py",
    "diagnostics/dialects/ollama_ndjson.py", "diagnostics/dialects/errorframes.py",
    "diagnostics/dialects/usage.py",
)
# Fixtures (and calls) that mean a test runs the proxy in another process.
SUBPROCESS_FIXTURES = {"proxy", "fake", "node"}
SUBPROCESS_MARKS = ("ProxyProcess(", "StreamtapProcess(", "subprocess.", "ReplayProcess(")


# -- which tests reach which line ---------------------------------------------------------------
class _ContextPlugin:
    def __init__(self, cov):
        self.cov = cov
        self.durations: dict[str, float] = {}

    def pytest_collection_modifyitems(self, config, items):
        kept, dropped = [], []
        for item in items:
            names = set(getattr(item, "fixturenames", ()))
            try:
                text = inspect.getsource(item.function)
            except (AttributeError, OSError, TypeError):
                text = ""
            if names & SUBPROCESS_FIXTURES or any(mark in text for mark in SUBPROCESS_MARKS):
                dropped.append(item)
            else:
                kept.append(item)
        items[:] = kept
        config.hook.pytest_deselected(items=dropped)

    def pytest_runtest_setup(self, item):
        self.cov.switch_context(item.nodeid)

    def pytest_runtest_logreport(self, report):
        self.durations[report.nodeid] = self.durations.get(report.nodeid, 0.0) + report.duration


class EmptyMap(Exception):
    """The map run measured no line of a module while tests ran: coverage did not trace (another
    tracer was active, or the tests never imported the module). Such a map is never cached."""


# The project's own ignored folder (see .gitignore), not the machine's shared temp dir: another
# checkout's or another user's map must never be read as this one.
CACHE_DIR = REPO / ".cache" / "mutate"


def map_tests(paths: list[str], tests: list[str]) -> tuple[dict[str, dict[int, set[str]]],
                                                             dict[str, float], int]:
    """The line map, from the project's cache while no test or module file changed. A map that
    measured nothing for a module is an error, never cached and never read back as "no test
    reaches it"."""
    digest = hashlib.sha256(json.dumps([paths, tests]).encode())
    for file in sorted(REPO.glob("tests/**/*.py")) + [REPO / p for p in paths]:
        digest.update(file.read_bytes())
    cache = CACHE_DIR / f"{digest.hexdigest()[:16]}.json"
    cached = _read_cache(cache, paths)
    if cached is not None:
        return cached[0], cached[1], 0
    lines, durations, code = _run_map(paths, tests)
    if code == 0:
        _check_measured(lines, durations)
        CACHE_DIR.mkdir(parents=True, exist_ok=True)
        cache.write_text(json.dumps({"lines": {p: {n: sorted(ids) for n, ids in by.items()}
                                               for p, by in lines.items()},
                                     "durations": durations}))
    return lines, durations, code


def _check_measured(lines: dict[str, dict[int, set[str]]], durations: dict[str, float]) -> None:
    unmeasured = [path for path, by_line in lines.items()
                  if not any(ids for ids in by_line.values())]
    if durations and unmeasured:
        raise EmptyMap(f"{len(durations)} tests ran but no line of {', '.join(unmeasured)} was "
                       "measured: run the command outside another coverage run (unset COVERAGE_* "
                       "variables), and check that --tests import the module")


def _read_cache(cache: Path, paths: list[str]):
    """A cached map, or None when there is none or it is unusable (partial, empty, unreadable)."""
    try:
        data = json.loads(cache.read_text())
        lines = {path: {int(n): set(ids) for n, ids in by_line.items()}
                 for path, by_line in data["lines"].items()}
        durations = data["durations"]
        if set(lines) != set(paths):
            return None
        _check_measured(lines, durations)
    except (OSError, ValueError, KeyError, TypeError, AttributeError, EmptyMap):
        return None
    return lines, durations


def _run_map(paths: list[str], tests: list[str]) -> tuple[dict[str, dict[int, set[str]]],
                                                          dict[str, float], int]:
    """Run the in-process tests once; per file, line -> node ids of the tests that ran it."""
    import coverage
    import pytest

    _few_examples()
    files = [str(measured_file(path)) for path in paths]
    # config_file=False: the suite's own settings (source, subprocess patch) are not for the map.
    cov = coverage.Coverage(data_file=None, include=files, branch=False, config_file=False)
    plugin = _ContextPlugin(cov)
    cov.start()
    with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
        code = pytest.main(["-q", "-p", "no:cacheprovider", "-o", "addopts=", *tests],
                           plugins=[plugin])
    cov.stop()
    data = cov.get_data()
    lines: dict[str, dict[int, set[str]]] = {}
    for path, real in zip(paths, files):
        by_line = data.contexts_by_lineno(real)
        lines[path] = {line: {c for c in ctx if c} for line, ctx in by_line.items()}
    return lines, plugin.durations, code


def measured_file(path: str) -> Path:
    """The file the tests run for a module of the checkout: the installed copy when streamtap is
    installed (`pip install .`, as CI does: the tests import site-packages, never the checkout),
    the checkout's own file under an editable install. Found without importing the module, so
    its import-time lines are still measured."""
    spec = importlib.util.find_spec("streamtap")
    if spec is not None and spec.origin:
        installed = Path(spec.origin).parent / path
        if installed.exists():
            return installed
    return REPO / path


def _few_examples() -> None:
    """Property tests draw 20 examples here, not 100: a mutant a property catches is caught
    early, and the map is a list of lines, not a proof."""
    from hypothesis import settings
    settings.register_profile("mutate", max_examples=20, deadline=None)
    settings.load_profile("mutate")


# -- running ------------------------------------------------------------------------------------
def run_child(module_path: str, source: str, mutant: Mutant, timeout: float) -> str:
    pid = os.fork()
    if pid == 0:  # the child: mutate in memory, run the tests, report through the exit code
        code = 3
        try:
            os.setpgid(0, 0)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)
            os.dup2(devnull, 2)
            import pytest
            try:
                if import_time(mutant):
                    import_mutated(source, module_path, mutant)
                    importlib.import_module(module_name(module_path))
                else:
                    module = importlib.import_module(module_name(module_path))
                    apply_mutant(module, source, module_path, mutant)
            except Exception:
                os._exit(1)  # the mutant does not even load: any test would fail
            code = pytest.main(["-x", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
                                *mutant.tests])
        finally:
            os._exit(int(code))
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            code = os.waitstatus_to_exitcode(status)
            return {0: "survived", 1: "killed"}.get(code, f"error ({code})")
        if time.monotonic() > deadline:
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            os.waitpid(pid, 0)
            return "timed out"
        time.sleep(0.01)


def naming_tests(names: set[str], durations: dict[str, float]) -> set[str]:
    """The tests of the test files that name one of the public `names`: a module-level value
    read at import (an allowlist another module imports) reaches no line a test runs, but a
    test that names it checks it."""
    public = {name for name in names if not name.startswith("_")}
    if not public:
        return set()
    files = {file for file, words in _test_words().items() if words & public}
    return {test for test in durations if test.split("::")[0] in files}


@functools.cache
def _test_words() -> dict[str, frozenset[str]]:
    return {file.relative_to(REPO).as_posix():
            frozenset(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", file.read_text()))
            for file in REPO.glob("tests/**/*.py")}


def load_equivalents() -> list[dict]:
    if not EQUIVALENTS.exists():
        return []
    return tomllib.loads(EQUIVALENTS.read_text()).get("equivalent", [])


def equivalent_reason(path: str, mutant: Mutant, equivalents: list[dict]) -> str | None:
    for entry in equivalents:
        if (entry.get("file") == path and entry.get("original") == mutant.original
                and entry.get("mutant") == mutant.mutated
                and entry.get("line", mutant.line) == mutant.line
                and entry.get("scope", ".".join(mutant.scope)) == ".".join(mutant.scope)):
            return entry["reason"]
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--module", action="append", metavar="PATH",
                        help="a module to mutate, as a repository path (repeatable; default: "
                             "every verdict module)")
    parser.add_argument("--tests", nargs="*", default=["tests"],
                        help="test paths to map and run (default: tests)")
    parser.add_argument("--ignore", action="append", default=[], metavar="PATH",
                        help="test paths to leave out (repeatable), e.g. to measure a before")
    parser.add_argument("--budget", type=float, default=0,
                        help="seconds after which no new mutant starts (0 = no limit); the "
                             "rest are reported as not run")
    parser.add_argument("--timeout-factor", type=float, default=3.0,
                        help="a mutant times out after this many times its tests' normal "
                             "duration, plus 20 s (a loaded machine is slow to start pytest)")
    parser.add_argument("--max-tests", type=int, default=0,
                        help="run at most the N fastest tests that reach a mutant (0 = all)")
    parser.add_argument("--list", action="store_true", help="only list the mutants")
    args = parser.parse_args(argv)
    os.chdir(REPO)
    sys.path.insert(0, str(REPO))
    os.nice(10)  # the machine is shared: mutants wait for everyone else
    paths = args.module or list(VERDICT_MODULES)
    for path in paths:
        if not (REPO / path).is_file():
            parser.error(f"no module {path}; give a path like diagnostics/verdict/classify.py")
    sources = {path: (REPO / path).read_text() for path in paths}
    found = {path: sorted(find_mutants(sources[path]), key=lambda m: (m.line, m.index))
             for path in paths}
    if args.list:
        for path, mutants in found.items():
            for m in mutants:
                print(f"{path}:{m.line}: [{m.op}] {m.original} -> {m.mutated}")
        return 0
    started = time.monotonic()
    tests = args.tests + [f"--ignore={path}" for path in args.ignore]
    try:
        lines, durations, code = map_tests(paths, tests)
    except EmptyMap as error:
        print(f"the line map is empty: {error}", file=sys.stderr)
        return 2
    if code not in (0, 5):
        print(f"the unmutated tests fail (pytest exit {code}): fix them first", file=sys.stderr)
        return 2
    print(f"mapped {len(durations)} tests to lines in {time.monotonic() - started:.0f} s")
    mutating = time.monotonic()  # the budget is for mutants, not for the map
    equivalents = load_equivalents()
    totals = {"killed": 0, "survived": 0, "timed out": 0, "error": 0, "not run": 0,
              "equivalent": 0}
    rows, report, done = [], [], 0
    stop = []  # set on Ctrl-C or SIGTERM: the rest is "not run", the table is still printed
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    signal.signal(signal.SIGINT, lambda *_: stop.append(True))
    for path in paths:
        counts = dict.fromkeys(totals, 0)
        for mutant in found[path]:
            reason = equivalent_reason(path, mutant, equivalents)
            if reason is not None:
                mutant.status = "equivalent"
                report.append(f"  equivalent {path}:{mutant.line}: {mutant.original} -> "
                              f"{mutant.mutated}  ({reason})")
            else:
                first, last = mutant.stmt_lines
                reach = set(range(first, last + 1))
                naming: set[str] = set()
                if mutant.binds:
                    names, bodies = readers(sources[path], mutant.binds)
                    reach |= uses(sources[path], tuple(names)) | bodies
                    naming = naming_tests(names, durations)
                tests = naming | set().union(*(lines[path].get(n, set()) for n in reach))
                # Fastest first: with -x, a mutant is usually killed by a quick unit test. A
                # test that names a module-level value goes before those that only run code
                # built from it: it is the one that checks the value.
                mutant.tests = sorted(tests, key=lambda t: (t not in naming,
                                                            durations.get(t, 1.0), t))
                if args.max_tests:
                    mutant.tests = mutant.tests[:args.max_tests]
                if not tests:
                    mutant.status = "survived"
                elif stop or (args.budget and time.monotonic() - mutating > args.budget):
                    mutant.status = "not run"
                else:
                    timeout = 20 + args.timeout_factor * sum(durations.get(t, 1.0)
                                                            for t in tests)
                    mutant.status = run_child(path, sources[path], mutant, timeout)
                    done += 1
                    if done % 50 == 0:
                        print(f"  ... {done} mutants run, {time.monotonic() - started:.0f} s",
                              file=sys.stderr, flush=True)
            status = "error" if mutant.status.startswith("error") else mutant.status
            counts[status] += 1
            if mutant.status in ("survived", "timed out") or status == "error":
                why = "" if mutant.tests else "  (no test reaches it)"
                report.append(f"  {mutant.status} {path}:{mutant.line}: {mutant.original} -> "
                              f"{mutant.mutated}{why}")
        for key in totals:
            totals[key] += counts[key]
        rows.append((path, counts))
    print("\n".join(report))
    print(f"{'module':44} {'killed':>7} {'survived':>9} {'timeout':>8} {'error':>6} "
          f"{'equiv':>6} {'not run':>8} {'killed%':>8}")
    for path, c in rows:
        print(f"{path:44} {c['killed']:7} {c['survived']:9} {c['timed out']:8} {c['error']:6} "
              f"{c['equivalent']:6} {c['not run']:8} {_percent(c):>8}")
    judged = sum(totals[k] for k in ("killed", "survived", "timed out", "error"))
    print(f"mutation: {totals['killed']}/{judged} killed ({_percent(totals)}) in "
          f"{time.monotonic() - started:.0f} s; {totals['equivalent']} equivalent, "
          f"{totals['not run']} not run")
    return 0


def _percent(counts: dict) -> str:
    judged = sum(counts[k] for k in ("killed", "survived", "timed out", "error"))
    return f"{100 * counts['killed'] / judged:.0f}%" if judged else "-"


if __name__ == "__main__":
    sys.exit(main())
