"""A database that fails under a command (a corrupted page, a lock another process holds past the wait), told as the
command's one-line error; what was stored stays as it was."""

from __future__ import annotations

import optuna
import sqlalchemy

from search.outputs.urls import mask_in


def database_failure(e: BaseException) -> str | None:
    """The one line for `e` when it is a database failing under the command (SQLAlchemy's, or Optuna's wrapping of
    one), naming the fix; None for any other error."""
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
    return f"the database failed: {reason}; fix: {fix}"
