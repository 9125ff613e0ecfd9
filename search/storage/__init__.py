"""Storage: where studies live. Opening a database (SQLite or PostgreSQL) for Optuna, masking its URL."""

import optuna

from search.storage.database import (
    StorageError,
    check_url,
    creation_lock,
    driver_lock,
    open_storage,
)

# every reader and writer of a study comes through here: Optuna's per-trial INFO lines are noise beside ours
optuna.logging.set_verbosity(optuna.logging.WARNING)

__all__ = [
    "StorageError",
    "check_url",
    "creation_lock",
    "driver_lock",
    "open_storage",
]
