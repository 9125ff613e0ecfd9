"""What the driver shows while a study runs: a live rich table on a terminal, plain log lines otherwise (piped,
or under Ray Jobs), where every trial line says which of the target's trials it is and the ETA, as the table does."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table

from prism import EvalPoint
from search.attrs import ROLE_SEARCH


@dataclass
class _Running:
    schedule: str
    role: str
    started: float
    place: str  # "k of N": the trained trial of the target it becomes, or that it is served
    point: EvalPoint | None = None


@dataclass
class Progress:
    """The CLI's search.study.StudyProgress: renders live on a TTY, logs one line per event otherwise. `target` and
    `done` count trained trials: a duplicate served from the cache is shown, and counted apart (search.analysis.budget).
    Messages before `begin` (the study being opened) are printed as they are."""

    console: Console = field(default_factory=lambda: Console(stderr=False, markup=False))  # user text, never tags
    live: bool | None = None

    def __post_init__(self) -> None:
        self.study, self.target, self.done_before = "", 0, 0
        self.started: float | None = None
        self._live: Live | None = None
        if self.live is None:
            self.live = self.console.is_terminal and sys.stdout.isatty()

    def begin(self, study: str, target: int, done_before: int) -> None:
        self.study, self.target, self.done_before = study, target, done_before  # done_before: trained before this run
        self.started = time.monotonic()
        self.running: dict[int, _Running] = {}
        self.counts = {"COMPLETE": 0, "PRUNED": 0, "FAIL": 0}
        self.served = 0
        self.best: tuple[float, str] | None = None
        self._live = Live(self._render(), console=self.console, refresh_per_second=2) if self.live else None
        if self._live:
            self._live.start()

    def retarget(self, target: int) -> None:
        self.target = target
        self._update()

    def _log(self, text: str, eta: bool = False) -> None:
        if self.started is None:
            self.console.print(text, highlight=False, soft_wrap=True)
        elif not self._live:
            text += f"; ETA {self._eta()}" if eta else ""
            elapsed = time.monotonic() - self.started
            self.console.print(f"[{elapsed:7.1f}s] {text}", highlight=False, soft_wrap=True)

    def _update(self) -> None:
        if self._live:
            self._live.update(self._render())

    def _eta(self) -> str:
        done = sum(self.counts[s] for s in ("COMPLETE", "PRUNED"))
        if not done or self.started is None:
            return "?"
        per_trial = (time.monotonic() - self.started) / done
        left = max(0, self.target - self.done_before - done)
        return f"{per_trial * left:.0f}s"

    def _render(self) -> Group:
        table = Table(title=f"study {self.study}: running trials", expand=False)
        for col in ("trial", "role", "schedule", "tokens", "val loss", "elapsed"):
            table.add_column(col)
        now = time.monotonic()
        for number, r in sorted(self.running.items()):
            table.add_row(
                str(number),
                r.role,
                r.schedule,
                f"{r.point.tokens:,}" if r.point else "-",
                f"{r.point.val_loss:.4f}" if r.point else "-",
                f"{now - r.started:.0f}s",
            )
        done = self.done_before + self.counts["COMPLETE"] + self.counts["PRUNED"]
        best = f"{self.best[1]} ({self.best[0]:.4f})" if self.best else "-"
        totals = Table.grid(padding=(0, 2))
        totals.add_row(
            f"done {done}/{self.target}",
            f"running {len(self.running)}",
            f"pruned {self.counts['PRUNED']}",
            f"failed {self.counts['FAIL']}",
            f"served from cache {self.served}",
            f"best {best}",
            f"ETA {self._eta()}",
        )
        return Group(table, totals)

    def started_trial(self, number: int, schedule: str, role: str, seed: int, served: bool = False) -> None:
        """`served`: a duplicate that will be given its original's result (it trains nothing, takes no place)."""
        trained = self.done_before + self.counts["COMPLETE"] + self.counts["PRUNED"]
        training = sum(r.place != "served" for r in self.running.values())
        place = "served" if served else f"{trained + training + 1} of {self.target}"
        self.running[number] = _Running(schedule, role, time.monotonic(), place)
        how = role if role == ROLE_SEARCH else f"{role}, seed {seed}"  # baselines and re-runs differ by their seed
        self._log(f"trial {number} ({place}) started: {schedule} ({how})", eta=True)
        self._update()

    def evaluated(self, number: int, point: EvalPoint) -> None:
        r = self.running[number]
        r.point = point
        self._log(f"trial {number} ({r.place}): {point.tokens:,} tokens, val loss {point.val_loss:.4f}", eta=True)
        self._update()

    def finished(self, number: int, state: str, value: float | None, note: str = "", served: bool = False) -> None:
        """`served`: a duplicate given its original's result; it trained nothing, so `done` does not count it."""
        r = self.running.pop(number, None)
        if served:
            self.served += 1
            note = note or "served from cache, not counted"
        else:
            self.counts[state] = self.counts.get(state, 0) + 1
        if state == "COMPLETE" and value is not None and (self.best is None or value < self.best[0]):
            self.best = (value, r.schedule if r else "?")
        shown = f" val loss {value:.4f}" if value is not None else ""
        place = f" ({r.place})" if r else ""
        self._log(f"trial {number}{place} {state}{shown}{' — ' + note if note else ''}", eta=True)
        self._update()

    def note(self, text: str) -> None:
        """A message that is not about one trial (database retries, recovered trials)."""
        if self._live:
            self._live.console.print(text, highlight=False, soft_wrap=True)
        else:
            self._log(text)

    def close(self) -> None:
        if self._live:
            self._live.stop()
            self._live = None
