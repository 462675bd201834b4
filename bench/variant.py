"""`streamtap serve` with one suspect of its event-loop stalls switched on or off, for the
benchmark's suspect rows (`python bench/run.py --suspects`).

    python bench/variant.py --variant gc-off --stats FILE -- serve --port 0 ...

Every variant also times each garbage collection (`gc.callbacks`) from the moment streamtap
listens, and the store thread's CPU time per record, and writes the counts and pauses per generation, with the longest pauses, to `--stats`
as JSON when the proxy exits. The
variants change the process, never streamtap's code on disk:

  as-shipped      streamtap as installed
  gc-off          no cyclic garbage collector at all: the most the collector can cost
  gc-unfrozen     the collector without streamtap's own gc.freeze() at start-up
  gc-gen0-10k     a young collection every 10,000 new objects, not 700: fewer, longer pauses
  switch-1ms      the GIL handed over every 1 ms, not 5 ms: how long the store thread (which
                  finishes and encodes each record) keeps the event loop waiting for the GIL
  no-log          no per-request log line (the metrics and the feed still run)
  no-lag-monitor  no event-loop lag checks (the timer behind `timeline.proxy_lag_max_ms`)
"""

from __future__ import annotations

import argparse
import atexit
import gc
import json
import sys
import time
from pathlib import Path

VARIANTS = ("as-shipped", "gc-off", "gc-unfrozen", "gc-gen0-10k", "switch-1ms", "no-log",
            "no-lag-monitor")
LONGEST_KEPT = 20


class GcTimer:
    """Counts and times collections per generation, from gc.callbacks."""

    def __init__(self) -> None:
        self.started = 0.0
        self.by_generation: dict[int, list[float]] = {0: [], 1: [], 2: []}

    def reset(self) -> None:
        """From now on: streamtap's own collection at start-up is not a stall of serving."""
        self.by_generation = {0: [], 1: [], 2: []}

    def __call__(self, phase: str, info: dict) -> None:
        if phase == "start":
            self.started = time.perf_counter()
        else:
            self.by_generation[info["generation"]].append(
                (time.perf_counter() - self.started) * 1000.0)

    def stats(self) -> dict:
        out = {}
        for generation, pauses in self.by_generation.items():
            ordered = sorted(pauses)
            out[f"gen{generation}"] = {
                "count": len(ordered), "total_ms": round(sum(ordered), 2),
                "max_ms": round(ordered[-1], 2) if ordered else 0.0,
                "over_1ms": sum(1 for p in ordered if p > 1.0),
                "longest_ms": [round(p, 2) for p in ordered[-LONGEST_KEPT:][::-1]]}
        return out


class StoreThreadTimer:
    """CPU time of the store thread's work per record (thread_time: in pure Python, time it held
    the GIL the event loop may be waiting for): finishing the record, writing its files, the log
    line with the metrics and the feed."""

    PARTS = (("finish", "streamtap.diagnostics.record.recorder", "Recorder", "finish"),
             ("write", "streamtap.proxy.store", None, "write_record"),
             ("log_and_feed", "streamtap.proxy.serve.app", "RunningProxy", "finished"))

    def __init__(self) -> None:
        self.spent: dict[str, list[float]] = {name: [] for name, *_ in self.PARTS}

    def install(self) -> None:
        import importlib

        for name, module_name, owner_name, attribute in self.PARTS:
            module = importlib.import_module(module_name)
            owner = getattr(module, owner_name) if owner_name else module
            setattr(owner, attribute, self._timed(name, getattr(owner, attribute)))

    def _timed(self, name: str, function):
        spent = self.spent[name]

        def timed(*args, **kwargs):
            started = time.thread_time()
            try:
                return function(*args, **kwargs)
            finally:
                spent.append((time.thread_time() - started) * 1000.0)
        return timed

    def stats(self) -> dict:
        return {name: {"count": len(ms), "total_ms": round(sum(ms), 2),
                       "max_ms": round(max(ms, default=0.0), 2)}
                for name, ms in self.spent.items()}


def apply(variant: str, timer: GcTimer) -> None:
    """Switch the suspect off (or the shipped remedy off) before streamtap starts; the timer
    counts from the moment streamtap listens."""
    from streamtap.proxy.serve import run

    settle = run.settle_garbage_collector
    if variant == "gc-unfrozen":
        settle = lambda: None  # noqa: E731
    run.settle_garbage_collector = lambda: (settle(), timer.reset())
    if variant == "gc-off":
        gc.disable()
    elif variant == "gc-gen0-10k":
        gc.set_threshold(10_000, *gc.get_threshold()[1:])
    elif variant == "switch-1ms":
        sys.setswitchinterval(0.001)
    elif variant == "no-log":
        from streamtap.proxy.serve.app import RunningProxy

        def metrics_only(self, record, path=None):
            self.metrics.observe(record)

        RunningProxy.log_exchange = metrics_only
    elif variant == "no-lag-monitor":
        from streamtap.proxy.serve import looplag

        looplag.LoopLag.open = lambda self, key, t0: None
        looplag.LoopLag.close = lambda self, key: (None, None)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--variant", choices=VARIANTS, required=True)
    parser.add_argument("--stats", required=True, help="where the collector's figures go (JSON)")
    parser.add_argument("serve_args", nargs=argparse.REMAINDER,
                        help="-- then streamtap's own arguments")
    args = parser.parse_args()
    serve_args = args.serve_args[1:] if args.serve_args[:1] == ["--"] else args.serve_args
    timer = GcTimer()
    gc.callbacks.append(timer)
    store = StoreThreadTimer()
    store.install()
    stats = Path(args.stats)
    atexit.register(lambda: stats.write_text(json.dumps(
        {"variant": args.variant, "gc": timer.stats(), "store_thread": store.stats(),
         "thresholds": gc.get_threshold(),
         "frozen_objects": gc.get_freeze_count(),
         "switch_interval_s": sys.getswitchinterval()})))
    apply(args.variant, timer)
    from streamtap.proxy.cli import main as streamtap_main

    return streamtap_main(serve_args)


if __name__ == "__main__":
    sys.exit(main())
