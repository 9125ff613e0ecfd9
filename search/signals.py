"""SIGTERM handled as Ctrl-C: `kill`, systemd, Kubernetes and `ray job stop` stop a command exactly as Ctrl-C does
(a run queues its trials again and prints the resume command; the dashboard closes its database). Imports nothing
of the project: the CLI, a study's lifecycle and the dashboard use it alike."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator


@contextlib.contextmanager
def sigterm_as_ctrl_c() -> Iterator[None]:
    """SIGTERM raises KeyboardInterrupt inside the block. Ray's `init` installs its own handler (which exits without
    a word), so a run enters the block again after Ray is up."""

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
