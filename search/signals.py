"""SIGTERM (and a SIGINT a shell told the process to ignore) handled as Ctrl-C: `kill`, systemd, Kubernetes and
`ray job stop` stop a command exactly as Ctrl-C does (a run queues its trials again and prints the resume command;
the dashboard closes its database). Imports nothing of the project: the CLI, a study's lifecycle and the dashboard
use it alike."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator


@contextlib.contextmanager
def sigterm_as_ctrl_c() -> Iterator[None]:
    """SIGTERM, and SIGINT, raise KeyboardInterrupt inside the block. SIGINT too because a shell starts a background
    job (`cmd &`) with SIGINT ignored, and Python then never turns it into KeyboardInterrupt: `kill -INT` would do
    nothing. Ray's `init` installs its own SIGTERM handler (which exits without a word), so a run enters the block
    again after Ray is up."""

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = {s: signal.signal(s, interrupt) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
