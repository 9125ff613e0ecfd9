"""The Optuna internals prism-search needs, in one place, so an Optuna upgrade is checked here only.

Optuna has no public way to reach a study's storage, a trial's storage id, to tell an enqueued trial from a
sampled one, to hold ready-made trials in a scratch study without copying them, to cache a storage for a
long-lived reader, or to find the trials whose heartbeat went stale without failing them (`fail_stale_trials`
fails them before the driver can record why and requeue them exactly once). Everything else goes through the
storage's public methods on `storage_of(study)`. The rest of the package reaches these through `search.storage`;
tests/test_layout.py checks that no other module imports Optuna's private modules or spells its system-attr keys.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any, Literal

import optuna
from optuna.storages._rdb import models
from optuna.storages._rdb.storage import _create_scoped_session
from optuna.trial import FrozenTrial, TrialState


def storage_of(study: optuna.Study) -> Any:
    """Optuna's cache around open_storage's RDBStorage: the BaseStorage methods and the heartbeat ones."""
    return study._storage


def trial_id(trial: optuna.Trial | FrozenTrial) -> int:
    """The storage's id of a trial (not its number): what every storage method takes."""
    return trial._trial_id


def stale_trial_ids(study: optuna.Study) -> list[int]:
    """RUNNING trials whose heartbeat is older than the storage's grace period, and those that never got one and
    started longer than that ago: a driver killed between `ask` and its first heartbeat (milliseconds apart) leaves
    such a trial, which Optuna never calls stale, so a resumed study would wait for it for ever. Their start is the
    asking driver's clock, compared with this one's: a cluster's clocks must agree within the grace period."""
    storage = storage_of(study)  # Optuna's cache around open_storage's RDBStorage, with heartbeats
    rdb = storage._backend
    stale = rdb._get_stale_trial_ids(study._study_id)
    with _create_scoped_session(rdb.scoped_session) as session:
        beating = {
            beating_id
            for (beating_id,) in session.query(models.TrialHeartbeatModel.trial_id)
            .join(models.TrialModel)
            .filter(models.TrialModel.study_id == study._study_id)
        }
    grace = timedelta(seconds=rdb.grace_period or 2 * rdb.heartbeat_interval)
    running = study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
    never = [trial_id(t) for t in running if trial_id(t) not in beating and t.datetime_start and datetime.now() - t.datetime_start > grace]
    return stale + [i for i in never if i not in stale]


def is_enqueued(trial: FrozenTrial) -> bool:
    """A trial `enqueue_trial` queued (its parameters are fixed), not one the sampler is to draw."""
    return "fixed_params" in trial.system_attrs


class _ReadyTrials(optuna.storages.InMemoryStorage):
    """In-memory storage serving ready-made trials as they are: `add_trials` would deep-copy each one, which was
    most of the importance time on a 5,000-trial study."""

    def __init__(self, trials: list[FrozenTrial]):
        super().__init__()
        self._ready = trials

    def get_all_trials(self, study_id: int, deepcopy: bool = True, states=None) -> list[FrozenTrial]:
        return [t for t in self._ready if states is None or t.state in states]


def scratch_study(trials: list[FrozenTrial], direction: Literal["minimize", "maximize"]) -> optuna.Study:
    """An in-memory study of trials made with `optuna.trial.create_trial`, numbered and given ids as `add_trials`
    would (PED-ANOVA tells trials apart by their ids: all 0, importances come out equal), without copying them."""
    for number, trial in enumerate(trials):
        trial.number = number
        trial._trial_id = number
    return optuna.create_study(storage=_ReadyTrials(trials), direction=direction)


def cached(storage: optuna.storages.RDBStorage) -> optuna.storages.BaseStorage:
    """Optuna's cache of finished trials around a storage, as `optuna.load_study` puts it around an RDBStorage."""
    return optuna.storages._CachedStorage(storage)


def dispose(storage: optuna.storages.BaseStorage) -> None:
    """Close every pooled connection of an RDBStorage, cached or not."""
    backend = getattr(storage, "_backend", storage)
    assert isinstance(backend, optuna.storages.RDBStorage)
    backend.engine.dispose()


def schema_tables() -> set[str]:
    """The tables Optuna's RDBStorage creates when it opens a database (besides Alembic's `alembic_version`)."""
    return set(models.BaseModel.metadata.tables)


@lru_cache(maxsize=1)
def schema_revisions() -> tuple[str, frozenset[str]]:
    """(head, every known) Alembic revision of Optuna's schema: what this Optuna writes and can upgrade from."""
    from alembic.script import ScriptDirectory

    script = ScriptDirectory(os.path.join(os.path.dirname(models.__file__), "alembic"))
    head = script.get_current_head()
    assert head is not None, "Optuna ships one schema head"
    return head, frozenset(r.revision for r in script.walk_revisions())


def create_schema(conn: Any) -> None:
    """Everything Optuna's RDBStorage creates when it opens a database (its tables, the schema version row, the
    Alembic stamp at head), made on `conn` inside the caller's transaction, so the caller decides when it is
    committed: all of it, or none. Parts already there are kept (a schema an older driver left half-made)."""
    import sqlalchemy
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory

    models.BaseModel.metadata.create_all(conn)
    versions = models.VersionInfoModel.__table__
    if conn.execute(sqlalchemy.select(sqlalchemy.func.count()).select_from(versions)).scalar() == 0:
        conn.execute(versions.insert().values(schema_version=models.SCHEMA_VERSION, library_version=optuna.__version__))
    context = MigrationContext.configure(conn)
    if context.get_current_revision() is None:
        context.stamp(ScriptDirectory(os.path.join(os.path.dirname(models.__file__), "alembic")), schema_revisions()[0])


def storage_url(study: optuna.Study) -> str:
    """The URL the study was opened from (never the masked one stored in its config)."""
    return storage_of(study)._backend.url


def whole_study(study: optuna.Study) -> optuna.Study:
    """The study behind Optuna's Hyperband bracket view: with a HyperbandPruner, Optuna hands samplers a study whose
    trials are one bracket's only (`pruners._filter_study`), so a sampler asking what is already taken must look
    past it."""
    return getattr(study, "_study", study)
