"""What a second and a third stop signal do to `streamtap serve`.

The first SIGINT/SIGTERM shuts down gracefully (run.py, app.py). The second means "exit now":
every exchange still in flight is ended at once (upstream closed, client reset, nothing awaited)
and still gets its record (boundary `proxy`, evidence `shutdown_forced`, the frames seen so far);
the records are written and the process exits 0. A third, while they are being written, exits at
once and says how many records it dropped. A user who presses Ctrl-C twice keeps the records of
the very streams they were debugging.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def exit_process(status: int) -> None:
    """Flush what was printed, then exit without Python's teardown (its threads, its handlers)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(status)


def force_exit(proxy, log) -> None:
    """The second signal, on the event loop: end every exchange in flight and hand its record
    to the store, then write every record and exit 0."""
    inflight = list(proxy.inflight)
    for exchange in inflight:
        exchange.force_end()
    log.warning("exiting_now", reason="a second stop signal", inflight=len(inflight),
                hint="writing the records of the streams that were in flight; a third signal "
                     "exits at once without the ones not yet written")
    exit_at_once_on_signal(proxy.store, log)
    # One more turn of the loop first: a transport closes its socket in a callback, so this is
    # what makes clients and upstreams see the end now, not when the process is gone.
    asyncio.get_running_loop().call_soon(_write_records_and_exit, proxy.store)


def _write_records_and_exit(store) -> None:
    store.close()  # a disk that hangs holds it 10 s at most; it says what it could not write
    exit_process(0)


def exit_at_once_on_signal(store, log, spare: int = 0) -> None:
    """From now on a stop signal exits at once, saying how many records it dropped (status 1
    if any, else 0); the first `spare` ones are only said (`still_writing_records`). A plain
    Python handler, not the loop's: the loop blocks while the store writes, and Python runs this
    one between the store's short joins (TraceStore.close)."""
    spared = 0

    def exit_at_once(signum: int, frame) -> None:
        nonlocal spared
        if spared < spare:
            spared += 1
            log.warning("still_writing_records", pending=store.pending(),
                        hint="another stop signal exits at once without them")
            return
        dropped = store.pending()
        log.error("exiting_at_once", reason="a third stop signal", records_dropped=dropped,
                  hint="records not yet written are lost; a second signal alone writes them")
        exit_process(1 if dropped else 0)

    for signum in STOP_SIGNALS:
        signal.signal(signum, exit_at_once)
