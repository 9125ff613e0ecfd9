"""The Optuna internals prism-search needs, in one place, so an Optuna upgrade is checked here only.

Optuna has no public way to reach a study's storage, a trial's storage id, to tell an enqueued trial from a
sampled one, to hold ready-made trials in a scratch study without copying them, to cache a storage for a
long-lived reader, or to find the trials whose heartbeat went stale without failing them (`fail_stale_trials`
fails them before the driver can record why and requeue them exactly once). Everything else goes through the
storage's public methods on `storage_of(study)`. The rest of the package reaches these through `search.storage`;
tests/test_layout.py checks that no other module imports Optuna's private modules or spells its system-attr keys.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections.abc import Callable, Container
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any, Literal

import optuna
import sqlalchemy
from optuna.distributions import BaseDistribution, json_to_distribution
from optuna.storages._rdb import models
from optuna.storages._rdb.storage import _create_scoped_session
from optuna.trial import FrozenTrial, TrialState

from search.errors import StorageError
from search.outputs.urls import mask_url


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


# What Optuna raises on stored content it cannot decode: text that is not UTF-8 (UnicodeDecodeError), an attribute
# that is not JSON (JSONDecodeError, both ValueErrors), a NULL objective value (AssertionError), a row of the wrong
# type (TypeError). Never KeyError: that is Optuna's "no such study or trial", which callers answer themselves.
CONTENT_DAMAGE = (ValueError, TypeError, AssertionError)


def damaged(url: str, e: BaseException) -> StorageError:
    """The one line for a database whose content (not its file) is damaged."""
    if isinstance(e, UnicodeDecodeError):
        what = "text that is not UTF-8"
    elif isinstance(e, json.JSONDecodeError):
        what = "a stored attribute that is not JSON"
    else:
        reason = str(e).strip().splitlines()[0] if str(e).strip() else ""
        what = f"a stored value Optuna cannot read ({type(e).__name__}{': ' + reason if reason else ''})"
    return StorageError(
        f"storage {mask_url(url)!r} is a damaged database: it holds {what}; fix: restore it from a backup or point --storage "
        "at another database"
    )


class ReadingStorage(optuna.storages.RDBStorage):
    """The RDBStorage of reading commands (status, best, export, report, the dashboard).

    Trials are read with SQLAlchemy Core into the FrozenTrials Optuna's ORM read builds (`read_trials`): the ORM
    made ~50 objects per trial, most of a 5,000-trial `status`. Content Optuna cannot decode ends in the one-line
    damaged-database error (exit 2 in the CLI, a 503 page in the dashboard), not in a traceback from inside Optuna.
    """

    def _get_trials(
        self, study_id: int, states: Container[TrialState] | None, included_trial_ids: set[int], trial_id_greater_than: int
    ) -> list[FrozenTrial]:
        return read_trials(self.engine, study_id, states, included_trial_ids, trial_id_greater_than)


def _guarded(read: Callable) -> Callable:
    @functools.wraps(read)
    def guarded(self: ReadingStorage, *args, **kwargs):
        try:
            return read(self, *args, **kwargs)
        except CONTENT_DAMAGE as e:
            self.engine.dispose()  # closed now: SQLite's last close removes the -wal and -shm files of a reader
            raise damaged(self.url, e) from None

    return guarded


for _read in (  # every read that decodes stored rows (Optuna's _CachedStorage reads trials through `_get_trials`)
    "get_study_id_from_name",
    "get_study_name_from_id",
    "get_study_directions",
    "get_study_user_attrs",
    "get_study_system_attrs",
    "get_all_studies",
    "get_trial",
    "get_trial_param",
    "get_trial_user_attrs",
    "get_trial_system_attrs",
    "get_all_trials",
    "_get_trials",
    "get_best_trial",
):
    setattr(ReadingStorage, _read, _guarded(getattr(ReadingStorage, _read)))


def read_trials(
    engine: sqlalchemy.Engine,
    study_id: int,
    states: Container[TrialState] | None,
    included_trial_ids: set[int],
    trial_id_greater_than: int,
) -> list[FrozenTrial]:
    """What `RDBStorage._get_trials` returns (the same trials, equal field by field, attrs in the order SQLite's
    unique (trial, key) index gives Optuna's read), read as plain rows: one query per table, each filtered by the
    same trials."""
    T = models.TrialModel
    where = [T.study_id == study_id]
    if states is not None:
        where.append(T.state.in_(list(states)))  # type: ignore[call-overload]
    included = [i for i in included_trial_ids if i <= trial_id_greater_than]
    if trial_id_greater_than > -1:
        newer = T.trial_id > trial_id_greater_than
        where.append(sqlalchemy.or_(T.trial_id.in_(included), newer) if included else newer)
    ids = sqlalchemy.select(T.trial_id).where(*where)

    def rows(*columns, order) -> list:
        return list(conn.execute(sqlalchemy.select(*columns).where(columns[0].in_(ids)).order_by(order)))

    with engine.connect() as conn:
        if conn.execute(sqlalchemy.select(models.StudyModel.study_id).where(models.StudyModel.study_id == study_id)).first() is None:
            raise KeyError(models.NOT_FOUND_MSG)
        P, V, U, S, I = (
            models.TrialParamModel,
            models.TrialValueModel,
            models.TrialUserAttributeModel,
            models.TrialSystemAttributeModel,
            models.TrialIntermediateValueModel,
        )
        trials = list(
            conn.execute(
                sqlalchemy.select(T.trial_id, T.number, T.state, T._datetime_start_utc, T._datetime_complete_utc)
                .where(*where)
                .order_by(T.trial_id)
            )
        )
        params = rows(P.trial_id, P.param_name, P.param_value, P.distribution_json, order=P.param_id)
        values = rows(V.trial_id, V.objective, V.value, V.value_type, order=V.trial_value_id)
        user = rows(U.trial_id, U.key, U.value_json, order=U.key)
        system = rows(S.trial_id, S.key, S.value_json, order=S.key)
        steps = rows(I.trial_id, I.step, I.intermediate_value, I.intermediate_value_type, order=I.step)
    by_trial: dict[int, dict[str, Any]] = {
        t.trial_id: {"values": {}, "params": {}, "distributions": {}, "user": {}, "system": {}, "steps": {}} for t in trials
    }
    parsed: dict[str, BaseDistribution] = {}
    for trial, name, value, distribution_json in params:
        distribution = parsed.get(distribution_json) or parsed.setdefault(distribution_json, json_to_distribution(distribution_json))
        by_trial[trial]["params"][name] = distribution.to_external_repr(value)
        by_trial[trial]["distributions"][name] = distribution
    for trial, objective, value, kind in values:
        by_trial[trial]["values"][objective] = V.stored_repr_to_value(value, kind)
    for table, key in ((user, "user"), (system, "system")):
        for trial, name, value_json in table:
            by_trial[trial][key][name] = json.loads(value_json)
    for trial, step, value, kind in steps:
        by_trial[trial]["steps"][step] = I.stored_repr_to_intermediate_value(value, kind)
    return [
        FrozenTrial(
            number=t.number,
            state=t.state,
            value=None,
            values=[by_trial[t.trial_id]["values"][k] for k in range(len(by_trial[t.trial_id]["values"]))] or None,
            datetime_start=_local(t[3]),
            datetime_complete=_local(t[4]),
            params=by_trial[t.trial_id]["params"],
            distributions=by_trial[t.trial_id]["distributions"],
            user_attrs=by_trial[t.trial_id]["user"],
            system_attrs=by_trial[t.trial_id]["system"],
            intermediate_values=by_trial[t.trial_id]["steps"],
            trial_id=t.trial_id,
        )
        for t in trials
    ]


def _local(utc: datetime | None) -> datetime | None:
    """A stored naive-UTC time as the naive local time Optuna's FrozenTrials carry (TrialModel.datetime_start)."""
    return None if utc is None else utc.replace(tzinfo=UTC).astimezone().replace(tzinfo=None)


def change_stamp(storage: optuna.storages.BaseStorage, study_name: str) -> str:
    """A stamp that moves whenever a trial of the study starts, reports, sets an attribute, finishes or fails, read
    as counts in the database (milliseconds, whatever the study's size), not from the trials."""
    rdb: Any = getattr(storage, "_backend", storage)
    T = models.TrialModel
    study_id = rdb.get_study_id_from_name(study_name)
    mine = sqlalchemy.select(T.trial_id).where(T.study_id == study_id)

    def count(model) -> Any:
        return sqlalchemy.select(sqlalchemy.func.count()).select_from(model).where(model.trial_id.in_(mine)).scalar_subquery()

    with rdb.engine.connect() as conn:
        states = conn.execute(sqlalchemy.select(T.state, sqlalchemy.func.count()).where(T.study_id == study_id).group_by(T.state)).all()
        counts = conn.execute(
            sqlalchemy.select(
                count(models.TrialIntermediateValueModel), count(models.TrialUserAttributeModel), count(models.TrialValueModel)
            )
        ).one()
    text = f"{study_id}:{sorted((s.name, n) for s, n in states)}:{tuple(counts)}"
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()
