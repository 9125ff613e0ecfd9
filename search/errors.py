"""Every error a user can fix. The CLI prints its one-line message (naming the field or flag and the fix) and
exits with code 2, before any compute and without touching stored data; anything else is a bug."""

from dataclasses import dataclass


class PrismSearchError(Exception):
    """An error the user can fix."""


class ConfigError(PrismSearchError):
    """A study config (TOML, CLI overrides or the copy stored with a study) that cannot be used."""


class StorageError(PrismSearchError):
    """A database URL that is not usable or not reachable."""


@dataclass(frozen=True)
class Unreadable:
    """A stored value no reader can decode (changed outside prism-search, or a damaged page): the study it is in,
    the trial (None: the study's own data), the field, and what it holds instead."""

    study: str
    field: str
    problem: str  # "holds 'BOGUS', not a trial state"
    trial: int | None = None

    def text(self) -> str:
        where = self.field if self.trial is None else f"trial {self.trial}'s {self.field}"
        return (
            f"study {self.study!r} is unreadable: {where} {self.problem}; fix: restore the study from a backup (the other "
            "studies of the storage read as usual)"
        )


class StudyUnreadable(StorageError):
    """One study whose stored content is damaged: it is named, and every other study of the storage reads on."""

    def __init__(self, unreadable: Unreadable):
        super().__init__(unreadable.text())
        self.unreadable = unreadable


class StorageUnreachable(StorageError):
    """A database server that does not answer: it may come back (the dashboard waits for it)."""


class ClusterError(PrismSearchError):
    """A Ray cluster address, or a storage that a cluster's workers cannot share."""


class DatabaseUnavailable(PrismSearchError):
    """The database went away during a run and stayed away through the retries."""


class TooManyFailures(PrismSearchError):
    """More trials failed than search.max_failed_trials allows."""


class InfrastructureFailure(PrismSearchError):
    """A node cannot run trials at all (no usable GPU there): every trial would fail the same way, whatever its schedule."""


class GridExhausted(PrismSearchError):
    """A grid sampler has visited every schedule of its space."""


class AuditError(PrismSearchError):
    """A model or profile `prism-search audit` cannot read."""


class PriorError(PrismSearchError):
    """A prior that does not fit the study it should seed."""


class OutputError(PrismSearchError):
    """An output file a command cannot write, or must not replace (a database, a config)."""


class StudyInterrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM during a study's run, resume or confirmation; in-flight trials were queued again.
    `stored`: whether the study exists in its storage (False: interrupted before it was created, nothing was
    stored). Known without a database read where the study was open, which a loaded machine may not finish in
    time (`ray job stop` kills the driver 3 s after its SIGTERM)."""

    def __init__(self, stored: bool) -> None:
        super().__init__("interrupted")
        self.stored = stored
