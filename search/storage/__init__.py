"""Storage: where studies live. Opening a database (SQLite or PostgreSQL) for Optuna, masking its URL, and the
few Optuna internals the service needs (search.storage._optuna: import them from here)."""

import optuna

from search.storage._optuna import (
    cached,
    change_stamp,
    dispose,
    is_enqueued,
    no_cycle_collection,
    scratch_study,
    stale_trial_ids,
    storage_of,
    storage_url,
    study_home,
    trial_id,
    unreadable_studies,
    whole_study,
)
from search.storage.database import (
    check_lasting,
    check_url,
    creation_lock,
    driver_ended,
    driver_lock,
    open_storage,
)

# every reader and writer of a study comes through here: Optuna's per-trial INFO lines are noise beside ours
optuna.logging.set_verbosity(optuna.logging.WARNING)

__all__ = [
    "cached",
    "change_stamp",
    "check_lasting",
    "check_url",
    "creation_lock",
    "dispose",
    "driver_ended",
    "driver_lock",
    "is_enqueued",
    "no_cycle_collection",
    "open_storage",
    "scratch_study",
    "stale_trial_ids",
    "storage_of",
    "storage_url",
    "study_home",
    "trial_id",
    "unreadable_studies",
    "whole_study",
]
