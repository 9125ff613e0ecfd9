"""Storage: where studies live. Opening a database (SQLite or PostgreSQL) for Optuna, masking its URL."""

from search.storage.database import GRACE_PERIOD_S, HEARTBEAT_INTERVAL_S, StorageError, creation_lock, mask_url, open_storage

__all__ = ["GRACE_PERIOD_S", "HEARTBEAT_INTERVAL_S", "StorageError", "creation_lock", "mask_url", "open_storage"]
