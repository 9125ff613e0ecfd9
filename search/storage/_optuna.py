"""The Optuna internals prism-search needs, in one place, so an Optuna upgrade is checked here only.

Optuna has no public way to reach a study's storage, a trial's storage id, to tell an enqueued trial from a
sampled one, to hold ready-made trials in a scratch study without copying them, to cache a storage for a
long-lived reader, or to find the trials whose heartbeat went stale without failing them (`fail_stale_trials`
fails them before the driver can record why and requeue them exactly once). Everything else goes through the
storage's public methods on `storage_of(study)`. The rest of the package reaches these through `search.storage`;
tests/test_layout.py checks that no other module imports Optuna's private modules or spells its system-attr keys.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import hashlib
import json
import os
from collections.abc import Callable, Container, Iterator
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any, Literal, NoReturn

import optuna
import sqlalchemy
from optuna.distributions import BaseDistribution, json_to_distribution
from optuna.storages._rdb import models
from optuna.storages._rdb.storage import _create_scoped_session
from optuna.study import StudyDirection
from optuna.study._frozen import FrozenStudy
from optuna.trial import FrozenTrial, TrialState

from search.errors import StorageError, StudyUnreadable, Unreadable
from search.outputs.urls import mask_in, mask_url


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


def study_home(study: optuna.Study) -> str:
    """Where this stored study lives, as a stamp: its database (a SQLite file by device and inode, which moving
    the file keeps and a copy of it never has; a server's host, port and database) and its id there. A copy made
    with `sqlite3 .backup`, `cp` or `optuna.copy_study` carries the study's attrs, never its home."""
    url = sqlalchemy.engine.make_url(storage_url(study))
    if url.drivername.startswith("sqlite") and url.database not in (None, "", ":memory:"):
        file = os.stat(url.database)
        where = f"sqlite:{file.st_dev}:{file.st_ino}"
    else:
        where = f"{url.drivername}://{url.host}:{url.port}/{url.database}"
    return hashlib.blake2b(f"{where}#{study._study_id}".encode(), digest_size=8).hexdigest()


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
    """The one line for a database whose schema (not one study's content) is damaged."""
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
    """The RDBStorage of reading commands (status, best, export, report, the dashboard): the one boundary where
    stored studies and trials are decoded.

    Studies and trials are read with SQLAlchemy Core, every stored value decoded on its own (`read_studies`,
    `read_trials`): the ORM made ~50 objects per trial, most of a 5,000-trial `status`, and one value it cannot
    decode (a state 'BOGUS', text where a number belongs, an attribute that is not JSON) ended every read of every
    study in a traceback. Here it makes its study unreadable (StudyUnreadable, naming the study, the trial and the
    field) and nothing else: the storage lists the other studies, and they read as usual.
    """

    def get_all_studies(self) -> list[FrozenStudy]:
        """The readable studies (`unreadable_studies`: the others)."""
        return [s for s in read_studies(self.engine) if isinstance(s, FrozenStudy)]

    @contextlib.contextmanager
    def _closed_when_unreadable(self) -> Iterator[None]:
        try:
            yield
        except StudyUnreadable:
            self.engine.dispose()  # closed now: SQLite's last close removes the -wal and -shm files of a reader
            raise

    def _study(self, study_id: int) -> FrozenStudy:
        found = read_studies(self.engine, study_id)
        if not found:
            raise KeyError(models.NOT_FOUND_MSG)
        if isinstance(found[0], Unreadable):
            with self._closed_when_unreadable():
                raise StudyUnreadable(found[0])
        return found[0]

    def get_study_directions(self, study_id: int) -> list[StudyDirection]:
        return list(self._study(study_id).directions)

    def get_study_user_attrs(self, study_id: int) -> dict[str, Any]:
        return self._study(study_id).user_attrs

    def get_study_system_attrs(self, study_id: int) -> dict[str, Any]:
        return self._study(study_id).system_attrs

    def _get_trials(
        self, study_id: int, states: Container[TrialState] | None, included_trial_ids: set[int], trial_id_greater_than: int
    ) -> list[FrozenTrial]:
        with self._closed_when_unreadable(), no_cycle_collection():
            return read_trials(self.engine, study_id, states, included_trial_ids, trial_id_greater_than)

    def get_trial(self, trial_id: int) -> FrozenTrial:
        with self.engine.connect() as conn:
            study_id = conn.execute(sqlalchemy.select(models.TrialModel.study_id).where(models.TrialModel.trial_id == trial_id)).scalar()
        if study_id is None:
            raise KeyError(models.NOT_FOUND_MSG)
        with self._closed_when_unreadable():
            return read_trials(self.engine, study_id, None, set(), -1, only=trial_id)[0]

    def get_trial_param(self, trial_id: int, param_name: str) -> float:
        trial = self.get_trial(trial_id)
        return trial.distributions[param_name].to_internal_repr(trial.params[param_name])

    def get_trial_user_attrs(self, trial_id: int) -> dict[str, Any]:
        return self.get_trial(trial_id).user_attrs

    def get_trial_system_attrs(self, trial_id: int) -> dict[str, Any]:
        return self.get_trial(trial_id).system_attrs


@contextlib.contextmanager
def no_cycle_collection() -> Iterator[None]:
    """Reading thousands of trials, or building a view of them, allocates objects that all live on: the cycle
    collector would scan them again and again and free nothing (a fifth of a 2,000-trial read here, a tenth of the
    dashboard's first page of 5,000 trials). Reference counting still frees the rest."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def unreadable_studies(storage: optuna.storages.BaseStorage) -> list[Unreadable]:
    """The studies of a reading storage (cached or not) whose own stored data (name, directions, attrs) cannot be
    decoded: `get_all_studies` leaves them out."""
    backend: Any = getattr(storage, "_backend", storage)
    return [s for s in read_studies(backend.engine) if isinstance(s, Unreadable)]


def _fetch(conn: sqlalchemy.Connection, query: Any) -> list:
    """The rows of `query`. SQLite's driver ends a whole query on text that is not UTF-8 (every study's, with it):
    such a query is run once more with that text handed back as its bytes, for the decoders to name. PostgreSQL
    refuses such text when it is written."""
    try:
        return list(conn.execute(query))
    except sqlalchemy.exc.OperationalError as e:
        if "decode to UTF-8" not in str(e.orig):
            raise
    driver: Any = conn.connection.driver_connection
    driver.text_factory = _text_or_bytes
    try:
        return list(conn.execute(query))
    finally:
        driver.text_factory = str


def _text_or_bytes(data: bytes) -> str | bytes:
    try:
        return data.decode()
    except UnicodeDecodeError:
        return data


# What a decoder raises on a stored value it cannot decode: JSON that is not JSON, NULL where a value belongs
# (TypeError, or Optuna's AssertionError), an unknown state or direction (KeyError), a category index past its
# choices (IndexError), a date that is no date (ValueError).
DECODE_ERRORS = (ValueError, TypeError, LookupError, AssertionError, AttributeError)
SHOWN_CHARS = 40
METRIC_NAMES = "study:metric_names"  # where Optuna stores `set_metric_names`


def _problem(value: object, what: str) -> str:
    if value is None:
        return "is NULL"
    if isinstance(value, bytes):
        return "holds bytes that are not UTF-8 text"
    shown = mask_in(repr(value))  # a password in a misplaced URL is never shown
    return f"holds {shown if len(shown) <= SHOWN_CHARS else shown[: SHOWN_CHARS - 3] + '...'}, not {what}"


def _whole(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(value)
    return value


def _number(value: object) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise TypeError(value)
    return float(value)


def _key(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(value)
    return value


def _external(distribution: BaseDistribution, value: object) -> Any:
    return distribution.to_external_repr(_number(value))  # a category index past its choices: IndexError


def _intermediate(kind: object, value: object) -> float:
    I = models.TrialIntermediateValueModel
    value_type = I.TrialIntermediateValueType[kind]  # type: ignore[misc]
    return I.stored_repr_to_intermediate_value(_number(value) if value_type == I.TrialIntermediateValueType.FINITE else None, value_type)


def _json(value: object) -> Any:
    if not isinstance(value, str):  # json.loads would also take bytes, guessing their encoding
        raise TypeError(value)
    return json.loads(value)


class _Decoder:
    """Decodes the stored values of one study one at a time: the first it cannot decode ends the read with
    StudyUnreadable naming the study, the trial and the field."""

    def __init__(self, study: str, dialect: sqlalchemy.Dialect):
        self.study = study
        start = models.TrialModel.__table__.c.datetime_start.type.dialect_impl(dialect).result_processor(dialect, None)  # SQLite: text
        self.time: Callable[[Any], Any] = start or (lambda v: v)

    def __call__(self, value: Any, decode: Callable[[Any], Any], what: str, field: str, trial: int | None = None) -> Any:
        try:
            return decode(value)
        except DECODE_ERRORS:
            raise StudyUnreadable(Unreadable(self.study, field, _problem(value, what), trial)) from None

    def fail(self, field: str, problem: str, trial: int | None = None) -> NoReturn:
        raise StudyUnreadable(Unreadable(self.study, field, problem, trial))

    def attrs(self, rows: list, kind: str, trial: int | None = None) -> dict[str, Any]:
        try:  # the common case in one pass: most of what a large study stores is attrs
            return {_key(name): _json(value_json) for name, value_json in rows}
        except DECODE_ERRORS:
            pass  # decoded one by one below, which names the first that fails
        out = {}
        for name, value_json in rows:
            key = self(name, _key, "text", f"{kind} attr key", trial)
            out[key] = self(value_json, _json, "JSON", f"{kind} attr {key!r}", trial)
        return out

    def steps(self, rows: list, trial: int) -> dict[int, float]:
        try:  # the common case in one pass: a learning curve is many steps
            return {_whole(step): _intermediate(kind, value) for step, value, kind in rows}
        except DECODE_ERRORS:
            pass  # decoded one by one below, which names the first that fails
        out = {}
        for step, value, kind in rows:
            at = self(step, _whole, "a step", "intermediate step", trial)
            self(
                kind,
                lambda v: models.TrialIntermediateValueModel.TrialIntermediateValueType[v],
                "a value type",
                f"intermediate value type at step {at}",
                trial,
            )
            out[at] = self(value, functools.partial(_intermediate, kind), "a number", f"intermediate value at step {at}", trial)
        return out

    def when(self, value: Any, field: str, trial: int) -> datetime | None:
        def decode(v: Any) -> datetime | None:
            parsed = None if v is None else self.time(v)
            if parsed is not None and not isinstance(parsed, datetime):
                raise TypeError(v)
            return parsed

        return _local(self(value, decode, "a date and time", field, trial))


def _raw(column: Any) -> Any:
    """A column as the database driver returns it: decoded by `_Decoder`, value by value, not by SQLAlchemy for the
    whole query."""
    return sqlalchemy.type_coerce(column, sqlalchemy.types.NullType())


def read_studies(engine: sqlalchemy.Engine, study_id: int | None = None) -> list[FrozenStudy | Unreadable]:
    """Every study (or the one `study_id`) as Optuna's `get_all_studies` builds it, or, for a study one of whose
    stored values cannot be decoded, what it holds there."""
    S, D, U, Y = models.StudyModel, models.StudyDirectionModel, models.StudyUserAttributeModel, models.StudySystemAttributeModel
    where = [] if study_id is None else [S.study_id == study_id]
    with engine.connect() as conn:
        studies = _fetch(conn, sqlalchemy.select(S.study_id, _raw(S.study_name)).where(*where).order_by(S.study_id))
        ids = [s[0] for s in studies]

        def rows(model, *columns) -> dict[int, list]:
            found: dict[int, list] = {}
            query = sqlalchemy.select(model.study_id, *columns).where(model.study_id.in_(ids)).order_by(columns[0])
            for study, *values in _fetch(conn, query):
                found.setdefault(study, []).append(values)
            return found

        directions = rows(D, _raw(D.objective), _raw(D.direction))
        user = rows(U, _raw(U.key), _raw(U.value_json))
        system = rows(Y, _raw(Y.key), _raw(Y.value_json))
    out: list[FrozenStudy | Unreadable] = []
    for sid, name in studies:
        shown = name.decode(errors="backslashreplace") if isinstance(name, bytes) else str(name)
        decode = _Decoder(shown, engine.dialect)
        try:
            decode(name, _key, "text", "name")
            objectives = {decode(o, _whole, "an objective index", "direction's objective"): d for o, d in directions.get(sid, [])}
            if sorted(objectives) != list(range(len(objectives))) or not objectives:
                decode.fail("directions", f"are stored for objectives {sorted(objectives)}, not 0 to n-1")
            system_attrs = decode.attrs(system.get(sid, []), "system")
            names = system_attrs.get(METRIC_NAMES)  # Optuna's readers take it as it is
            if names is not None and not (isinstance(names, list) and all(isinstance(n, str) for n in names)):
                decode.fail(f"system attr {METRIC_NAMES!r}", _problem(names, "a list of metric names"))
            out.append(
                FrozenStudy(
                    study_name=name,
                    direction=None,
                    directions=[
                        decode(objectives[k], lambda v: StudyDirection[v], "a direction", f"direction of objective {k}")
                        for k in range(len(objectives))
                    ],
                    user_attrs=decode.attrs(user.get(sid, []), "user"),
                    system_attrs=system_attrs,
                    study_id=sid,
                )
            )
        except StudyUnreadable as e:
            out.append(e.unreadable)
    return out


def read_trials(
    engine: sqlalchemy.Engine,
    study_id: int,
    states: Container[TrialState] | None,
    included_trial_ids: set[int],
    trial_id_greater_than: int,
    only: int | None = None,
) -> list[FrozenTrial]:
    """What `RDBStorage._get_trials` returns (the same trials, equal field by field, attrs in the order SQLite's
    unique (trial, key) index gives Optuna's read), read as plain rows: one query per table, each filtered by the
    same trials. `only`: that one trial. A value that cannot be decoded raises StudyUnreadable naming it."""
    T = models.TrialModel
    where = [T.study_id == study_id]
    if states is not None:
        where.append(T.state.in_(list(states)))  # type: ignore[call-overload]
    included = [i for i in included_trial_ids if i <= trial_id_greater_than]
    if trial_id_greater_than > -1:
        newer = T.trial_id > trial_id_greater_than
        where.append(sqlalchemy.or_(T.trial_id.in_(included), newer) if included else newer)
    if only is not None:
        where.append(T.trial_id == only)
    ids = sqlalchemy.select(T.trial_id).where(*where)

    def rows(*columns, order) -> dict[int, list]:
        found: dict[int, list] = {}
        for trial, *values in _fetch(conn, sqlalchemy.select(*columns).where(columns[0].in_(ids)).order_by(order)):
            found.setdefault(trial, []).append(values)
        return found

    with engine.connect() as conn:
        name = next(
            iter(_fetch(conn, sqlalchemy.select(_raw(models.StudyModel.study_name)).where(models.StudyModel.study_id == study_id))), None
        )
        if name is None:
            raise KeyError(models.NOT_FOUND_MSG)
        P, V, U, S, I = (
            models.TrialParamModel,
            models.TrialValueModel,
            models.TrialUserAttributeModel,
            models.TrialSystemAttributeModel,
            models.TrialIntermediateValueModel,
        )
        trials = _fetch(
            conn,
            sqlalchemy.select(T.trial_id, _raw(T.number), _raw(T.state), _raw(T._datetime_start_utc), _raw(T._datetime_complete_utc))
            .where(*where)
            .order_by(T.trial_id),
        )
        params = rows(P.trial_id, _raw(P.param_name), _raw(P.param_value), _raw(P.distribution_json), order=P.param_id)
        values = rows(V.trial_id, _raw(V.objective), _raw(V.value), _raw(V.value_type), order=V.trial_value_id)
        user = rows(U.trial_id, _raw(U.key), _raw(U.value_json), order=U.key)
        system = rows(S.trial_id, _raw(S.key), _raw(S.value_json), order=S.key)
        steps = rows(I.trial_id, _raw(I.step), _raw(I.intermediate_value), _raw(I.intermediate_value_type), order=I.step)
    decode = _Decoder(name[0].decode(errors="backslashreplace") if isinstance(name[0], bytes) else str(name[0]), engine.dialect)
    parsed: dict[str, BaseDistribution] = {}

    def distribution(text: object) -> BaseDistribution:
        key = _key(text)
        return parsed.get(key) or parsed.setdefault(key, json_to_distribution(key))

    out = []
    for trial_id_, number, state, start, complete in trials:
        n = decode(number, _whole, "a trial number", f"number (trial id {trial_id_})")
        trial_params, distributions = {}, {}
        for param, value, distribution_json in params.get(trial_id_, []):
            param = decode(param, _key, "text", "param name", n)
            dist = distributions[param] = decode(
                distribution_json, distribution, "an Optuna distribution", f"distribution of param {param!r}", n
            )
            trial_params[param] = decode(value, functools.partial(_external, dist), "a value of its distribution", f"param {param!r}", n)
        objectives = {}
        for objective, value, kind in values.get(trial_id_, []):
            k = decode(objective, _whole, "an objective index", "objective index", n)
            value_type = decode(kind, lambda v: V.TrialValueType[v], "a value type", f"value type of objective {k}", n)
            finite = value_type == V.TrialValueType.FINITE
            objectives[k] = V.stored_repr_to_value(
                decode(value, _number, "a number", f"value of objective {k}", n) if finite else None, value_type
            )
        if sorted(objectives) != list(range(len(objectives))):
            decode.fail("values", f"are stored for objectives {sorted(objectives)}, not 0 to n-1", n)
        intermediate = decode.steps(steps.get(trial_id_, []), n)
        out.append(
            FrozenTrial(
                number=n,
                state=decode(state, lambda v: TrialState[v], "a trial state", "state", n),
                value=None,
                values=[objectives[k] for k in range(len(objectives))] or None,
                datetime_start=decode.when(start, "start time", n),
                datetime_complete=decode.when(complete, "completion time", n),
                params=trial_params,
                distributions=distributions,
                user_attrs=decode.attrs(user.get(trial_id_, []), "user", n),
                system_attrs=decode.attrs(system.get(trial_id_, []), "system", n),
                intermediate_values=intermediate,
                trial_id=trial_id_,
            )
        )
    return out


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
        state = _raw(T.state)  # as stored: a state no trial can have changes the stamp too, never ends it
        states = conn.execute(sqlalchemy.select(state, sqlalchemy.func.count()).where(T.study_id == study_id).group_by(state)).all()
        counts = conn.execute(
            sqlalchemy.select(
                count(models.TrialIntermediateValueModel), count(models.TrialUserAttributeModel), count(models.TrialValueModel)
            )
        ).one()
    text = f"{study_id}:{sorted((repr(s), n) for s, n in states)}:{tuple(counts)}"
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()
