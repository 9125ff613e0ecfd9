"""A database that fails under a command (a corrupted page, a lock another process holds past the wait), told as the
command's one-line error; what was stored stays as it was."""

from __future__ import annotations

from dataclasses import dataclass

import optuna
import sqlalchemy

from search.outputs.urls import mask_in


@dataclass(frozen=True)
class DatabaseFailure:
    """A database that failed under a command (SQLAlchemy's error, or Optuna's wrapping of one): its one line."""

    text: str

    @classmethod
    def of(cls, e: BaseException) -> DatabaseFailure | None:
        """The failure `e` is, naming the fix; None for any error that is not a database failing."""
        if not isinstance(e, (sqlalchemy.exc.DBAPIError, optuna.exceptions.StorageInternalError)):
            return None
        cause = e if isinstance(e, sqlalchemy.exc.DBAPIError) else (e.__cause__ or e)
        orig = getattr(cause, "orig", None) or cause
        reason = mask_in(str(orig).strip().splitlines()[0] if str(orig).strip() else type(orig).__name__)
        fix = (
            "wait for the other process that holds it, then run the command again"
            if "locked" in reason
            else "restore the database from a backup, or point --storage at another one"
        )
        return cls(f"the database failed: {reason}; fix: {fix}")
