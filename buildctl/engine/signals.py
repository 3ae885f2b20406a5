"""Signals around engine work: SIGTERM/SIGHUP as Ctrl-C while a build or container runs, and signals
held while a container is removed, so that `finally:` clean-up runs to its end."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """For the duration of the block, SIGTERM and SIGHUP raise KeyboardInterrupt (as Ctrl-C does).

    So `finally:` blocks run when a CI runner or `timeout` stops the command. A no-op outside the
    main thread and when the signals already have a handler (nested use, the caller's own, SIG_IGN).
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"terminated by signal {signal.Signals(signum).name}")

    previous: dict[int, Any] = {}
    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) in (signal.SIG_DFL, None):
            previous[sig] = signal.signal(sig, handler)
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, signal.SIG_DFL if old is None else old)


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """Hold SIGINT/SIGTERM/SIGHUP during cleanup; a signal that came in is raised afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []
    sigs = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    old = {s: signal.signal(s, lambda signum, frame: pending.append(signum)) for s in sigs}

    def restore() -> None:
        for s, h in old.items():
            signal.signal(s, signal.SIG_DFL if h is None else h)

    try:
        yield
    except BaseException:
        restore()
        raise
    restore()
    if pending:
        raise KeyboardInterrupt(f"interrupted by signal {signal.Signals(pending[0]).name}")



