"""What a running study tells its caller: the progress protocol, and a plain logging implementation of it.

The driver, the confirmation and the experiment report to one object with the methods of `StudyProgress`. The CLI
passes its live rich table (search.cli.progress.Progress); a notebook, a Ray Job or any program without a terminal gets
`LogProgress`, one line per event on the standard `logging` module, unless it passes an object of its own.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Protocol

from search.attrs import ROLE_SEARCH

if TYPE_CHECKING:
    from prism import EvalPoint


class StudyProgress(Protocol):
    """The events of one `Study.run`, `resume` or `confirm`. `target` and `done_before` count trained trials; a
    duplicate served from the cache (`served=True`) trained nothing and is counted apart."""

    def begin(self, study: str, target: int, done_before: int) -> None:
        """Trials are about to train (anything `note`d before this came while the study was being opened)."""

    def retarget(self, target: int) -> None:
        """The number of trained trials this run ends at, once it is known better (a confirmation that finds runs
        an earlier one already trained)."""

    def started_trial(self, number: int, schedule: str, role: str, seed: int, served: bool = False) -> None:
        """`served`: a duplicate that will be given its original's result (it trains nothing)."""

    def evaluated(self, number: int, point: EvalPoint) -> None: ...

    def finished(self, number: int, state: str, value: float | None, note: str = "", served: bool = False) -> None: ...

    def note(self, text: str) -> None:
        """A message about the study rather than one trial (recovered trials, database retries, the Ray dashboard)."""

    def close(self) -> None:
        """The run is over (finished, failed or interrupted)."""


class LogProgress:
    """`StudyProgress` as log records of the `search` logger: the default outside the CLI. Each finished trial says
    k of N and an estimate of the time left.

    Example:
        >>> import logging, sys
        >>> logger = logging.getLogger("search.demo")  # any logger; the default is "search"
        >>> logger.addHandler(logging.StreamHandler(sys.stdout)); logger.setLevel(logging.INFO); logger.propagate = False
        >>> progress = LogProgress(logger)
        >>> progress.begin("demo", target=2, done_before=1)
        study demo: 1 of 2 trials trained, training the rest
        >>> progress.finished(7, "COMPLETE", 2.3456)
        trial 7 COMPLETE val loss 2.3456 (2 of 2)
    """

    def __init__(self, logger: logging.Logger | None = None) -> None:
        self.logger = logger or logging.getLogger("search")
        self.study, self.target, self.done_before, self.done = "", 0, 0, 0
        self.started = time.monotonic()

    def begin(self, study: str, target: int, done_before: int) -> None:
        self.study, self.target, self.done_before, self.done = study, target, done_before, 0
        self.started = time.monotonic()
        self.logger.info("study %s: %d of %d trials trained, training the rest", study, done_before, target)

    def retarget(self, target: int) -> None:
        self.target = target

    def started_trial(self, number: int, schedule: str, role: str, seed: int, served: bool = False) -> None:
        how = role if role == ROLE_SEARCH else f"{role}, seed {seed}"  # baselines and re-runs differ by their seed
        self.logger.info("trial %d started: %s (%s)", number, schedule, how)

    def evaluated(self, number: int, point: EvalPoint) -> None:
        self.logger.debug("trial %d: %d tokens, val loss %.4f", number, point.tokens, point.val_loss)

    def finished(self, number: int, state: str, value: float | None, note: str = "", served: bool = False) -> None:
        if served:
            note = note or "served from the cache, not counted"
        else:
            self.done += 1
        k = self.done_before + self.done
        shown = f" val loss {value:.4f}" if value is not None else ""
        self.logger.info("trial %d %s%s (%d of %d%s)%s", number, state, shown, k, self.target, self._eta(k), f": {note}" if note else "")

    def note(self, text: str) -> None:
        self.logger.info("%s", text)

    def close(self) -> None:
        self.logger.info("study %s: run over after %.0f s", self.study, time.monotonic() - self.started)

    def _eta(self, k: int) -> str:
        if not self.done or k >= self.target:
            return ""
        per_trial = (time.monotonic() - self.started) / self.done
        return f", about {per_trial * (self.target - k):.0f} s left"
