"""SIGTERM (and a SIGINT a shell told the process to ignore) handled as Ctrl-C: `kill`, systemd, Kubernetes and
`ray job stop` stop a command exactly as Ctrl-C does (a run queues its trials again and prints the resume command;
the dashboard closes its database). Imports nothing of the project: the CLI, a study's lifecycle and the dashboard
use it alike."""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Iterator

# set: a signal was turned into KeyboardInterrupt that has not yet been seen leaving a block. Python runs a signal
# handler wherever the main thread is, and a KeyboardInterrupt raised inside a finalizer or a garbage-collection
# callback (SQLAlchemy has them) is only printed ("Exception ignored in ..."), never raised: the run would go on to
# its end
_pending = threading.Event()


def raise_if_interrupted() -> None:
    """Raise the KeyboardInterrupt a signal raised where Python had to ignore it; a loop calls this at every turn."""
    if _pending.is_set():
        raise KeyboardInterrupt


@contextlib.contextmanager
def sigterm_as_ctrl_c() -> Iterator[None]:
    """SIGTERM, and SIGINT, raise KeyboardInterrupt inside the block. SIGINT too because a shell starts a background
    job (`cmd &`) with SIGINT ignored, and Python then never turns it into KeyboardInterrupt: `kill -INT` would do
    nothing. Ray's `init` installs its own SIGTERM handler (which exits without a word), so a run enters the block
    again after Ray is up."""

    def interrupt(signum, frame):
        _pending.set()
        raise KeyboardInterrupt

    try:
        with _handling(interrupt), _quiet_when_swallowed():
            yield
            if _pending.is_set():  # swallowed where it landed, and no loop's check raised it since: it surfaces here, at the latest
                raise KeyboardInterrupt
    except KeyboardInterrupt:
        _pending.clear()  # it leaves the block: delivered
        raise


@contextlib.contextmanager
def _quiet_when_swallowed() -> Iterator[None]:
    """Inside the block, a KeyboardInterrupt that a finalizer swallowed is not printed: `_pending` delivers it, and
    Python's "Exception ignored in ... Traceback" would read as a crash on an orderly stop. Every other exception a
    finalizer swallows is printed as before."""
    previous = sys.unraisablehook

    def hook(unraisable) -> None:
        if not (isinstance(unraisable.exc_value, KeyboardInterrupt) and _pending.is_set()):
            previous(unraisable)

    sys.unraisablehook = hook
    try:
        yield
    finally:
        sys.unraisablehook = previous


@contextlib.contextmanager
def interrupts_held() -> Iterator[None]:
    """A Ctrl-C or SIGTERM inside the block takes effect, as KeyboardInterrupt, when the block ends; a second one at
    once. For steps an interrupt must not cut in half: Ray's start-up (an interrupt inside `ray.init` leaves Ray half
    started, and its exit handlers then crashed the process, exit 139), and the driver's `ask` (a trial the database
    made RUNNING must be known to the driver before an interrupt can act). The second signal still stops a step that
    hangs. Only the main thread handles signals: elsewhere the block runs as it is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []

    def hold(signum, frame):
        if held:
            raise KeyboardInterrupt
        held.append(signum)

    with _handling(hold):
        yield
    if held:
        raise KeyboardInterrupt


@contextlib.contextmanager
def _handling(handler) -> Iterator[None]:
    """`handler` for SIGTERM and SIGINT inside the block; the handlers before it are back after."""
    previous = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for signum, earlier in previous.items():
            signal.signal(signum, earlier)
