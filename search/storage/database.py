"""The one storage factory: a SQLAlchemy URL -> an Optuna RDBStorage with heartbeats, checked before use.

Only the driver process opens storage (workers never do), so SQLite sees a single writer and PostgreSQL a
handful of connections however many workers run. Heartbeats let a later `resume` find trials left RUNNING by
a driver that died.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import sqlite3
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import optuna
import sqlalchemy

from search.errors import StorageError, StorageUnreachable
from search.storage._optuna import schema_revisions, schema_tables
from search.urls import mask_url

# the heartbeat arguments are marked experimental; they are what makes crash recovery possible
warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
# the driver records heartbeats itself (ask/tell has none of its own), which is what Optuna warns about
warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed to be used with Study.optimize")

# A trial whose driver sent no heartbeat for GRACE_PERIOD_S is taken as lost. Overridable from the environment
# (tests shorten them; a cluster on a slow network may lengthen them).
HEARTBEAT_INTERVAL_S = int(os.environ.get("PRISM_SEARCH_HEARTBEAT_S", 10))
GRACE_PERIOD_S = int(os.environ.get("PRISM_SEARCH_GRACE_S", 30))


def check_url(url: str) -> None:
    """A malformed URL (a non-numeric port) would otherwise surface as a traceback from deep inside SQLAlchemy."""
    try:
        sqlalchemy.engine.make_url(url)
    except (sqlalchemy.exc.ArgumentError, ValueError) as e:
        raise StorageError(
            f"storage {mask_url(url)!r} is not a valid SQLAlchemy URL ({e}) (fix: e.g. sqlite:///prism_search.db or "
            "postgresql+psycopg://USER@HOST:5432/DB, the port a number)"
        ) from None


def _check_reachable(url: str) -> None:
    check_url(url)
    if url.startswith("sqlite:///"):
        path = _sqlite_file(url)
        if path and not path.resolve().parent.is_dir():
            raise StorageError(f"storage {mask_url(url)!r}: folder {str(path.parent)!r} does not exist; create it or change --storage")
        return
    try:
        engine = sqlalchemy.create_engine(url, poolclass=sqlalchemy.pool.NullPool, connect_args=_connect_args(url))
    except (sqlalchemy.exc.NoSuchModuleError, ImportError) as e:  # a parsable URL naming a dialect or driver not installed
        raise StorageError(f"storage {mask_url(url)!r} is not a valid SQLAlchemy URL ({e}) (fix: e.g. sqlite:///prism_search.db)") from None
    try:
        with engine.connect():
            pass
    except sqlalchemy.exc.OperationalError as e:
        reason = _first_line(e)
        raise StorageUnreachable(f"storage {mask_url(url)!r} is unreachable ({reason}); start the database or fix --storage") from None
    finally:
        engine.dispose()


def _connect_args(url: str) -> dict:
    if url.startswith("sqlite"):
        return {"timeout": 30}  # wait out a concurrent reader instead of failing at SQLite's 5 s default
    if url.startswith("postgresql"):
        return {"connect_timeout": 5}
    return {}


@contextlib.contextmanager
def creation_lock(url: str) -> Iterator[None]:
    """Serialise schema and study creation across drivers: two `run`s at once create tables and enqueue a
    study's baselines once.

    PostgreSQL: a transaction-level advisory lock. SQLite needs none: `driver_lock`, held around it for the
    driver's life, already admits one driver per file.
    """
    if url.startswith("postgresql"):
        _check_reachable(url)
        engine = sqlalchemy.create_engine(url, poolclass=sqlalchemy.pool.NullPool, connect_args=_connect_args(url))
        try:
            with engine.begin() as conn:
                conn.execute(sqlalchemy.text("SELECT pg_advisory_xact_lock(:key)"), {"key": _LOCK_KEY})
                yield
        finally:
            engine.dispose()
    else:
        yield


@contextlib.contextmanager
def driver_lock(url: str) -> Iterator[None]:
    """One driver at a time on a SQLite file, held for the driver's life: SQLite has no row locks, so two drivers
    could both claim one queued trial (Optuna reads WAITING, then updates, outside one write transaction). The
    flock dies with its process, so a killed driver leaves no stale lock. PostgreSQL: any number of drivers."""
    path = _sqlite_file(url)
    if path is None:
        yield
        return
    _check_reachable(url)
    _check_schema(url, create=True)  # a damaged file fails before a lock file appears beside it
    with _lock_file(url, f"{path}.driver.lock") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            holder = lock.read().strip() or "another process"
            raise StorageError(
                f"storage {mask_url(url)!r} is in use by another prism-search driver ({holder}); fix: wait for it to "
                "finish, or put the study on PostgreSQL (--storage postgresql+psycopg://...) to run several drivers at once"
            ) from None
        lock.truncate(0)
        lock.write(f"pid {os.getpid()}")
        lock.flush()
        yield


def _lock_file(url: str, name: str) -> IO[str]:
    """A lock file beside a SQLite study (its content: who holds it)."""
    try:
        return open(name, "a+")
    except OSError as e:
        raise StorageError(f"storage {mask_url(url)!r}: cannot write {name} ({e.strerror}); fix: a writable --storage folder") from None


_LOCK_KEY = int.from_bytes(hashlib.sha256(b"prism-search creation").digest()[:8], "big", signed=True)


def _sqlite_file(url: str) -> Path | None:
    path = url.removeprefix("sqlite:///") if url.startswith("sqlite:///") else ""
    return Path(path) if path and path != ":memory:" else None


def _new_wal_database(path: Path) -> None:
    """Create a study file in write-ahead-log mode (a setting stored in the file): with synchronous=NORMAL a
    commit then no longer waits for an fsync (9 ms each here, and a trial makes dozens), readers such as a
    dashboard stop blocking the writer, and a killed driver still loses nothing it committed (only a power
    cut can drop the last commits). Existing files are left in the mode they have."""
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA journal_mode=WAL")


def _sqlite_sync_normal(dbapi_connection, _record) -> None:
    dbapi_connection.execute("PRAGMA synchronous=NORMAL")  # per connection; in WAL mode: sync at checkpoints


def _first_line(e: BaseException) -> str:
    orig = getattr(e, "orig", None) or e
    return str(orig).strip().splitlines()[0] if str(orig).strip() else type(orig).__name__


def _check_schema(url: str, create: bool) -> None:
    """Look before Optuna touches the database: RDBStorage creates missing tables, a version row and an Alembic
    stamp whenever it opens one. Reading commands (`create=False`) need Optuna's complete, current schema and
    change nothing; a writing one may start on a database without Optuna's tables, never on a damaged or
    outdated one (Optuna would re-create a lost table empty, or fail deep inside a run)."""
    masked = mask_url(url)
    sqlite_file = _sqlite_file(url)
    if sqlite_file and not sqlite_file.exists():  # connecting would create it
        if create:
            return
        raise StorageError(f"no prism-search studies in {masked}: no database file at {str(sqlite_file)!r} ({_START_HINT})")
    engine = sqlalchemy.create_engine(url, poolclass=sqlalchemy.pool.NullPool, connect_args=_connect_args(url))
    try:
        with engine.connect() as conn:
            tables = set(sqlalchemy.inspect(conn).get_table_names())
            revisions = _column(conn, "SELECT version_num FROM alembic_version") if "alembic_version" in tables else []
            versioned = "version_info" in tables and _column(conn, "SELECT count(*) FROM version_info") != [0]
    except sqlalchemy.exc.DBAPIError as e:
        raise StorageError(
            f"storage {masked!r} cannot be read as a database ({_first_line(e)}); fix: point --storage at a prism-search database"
        ) from None
    finally:
        engine.dispose()
    ours = schema_tables() | {"alembic_version"}
    if not tables & ours:
        if create:
            return
        what = "no tables" if not tables else f"only another application's tables ({', '.join(sorted(tables)[:3])}...)"
        raise StorageError(f"no prism-search studies in {masked}: the database holds {what} ({_START_HINT})")
    missing = sorted(ours - tables) or ([] if revisions and versioned else ["the rows naming its schema version"])
    if missing:
        raise StorageError(
            f"storage {masked!r} is a damaged Optuna database: it lacks {', '.join(missing)}; "
            "fix: restore it from a backup or point --storage at another database"
        )
    head, known = schema_revisions()
    if revisions != [head]:
        found = ", ".join(revisions)
        fix = (
            f"back it up, then `optuna storage upgrade --storage {masked}`"
            if set(revisions) <= known
            else f"use the Optuna version that wrote it (this is optuna {optuna.__version__}) or another --storage"
        )
        raise StorageError(f"storage {masked!r} has Optuna schema revision {found}, this Optuna reads {head}; fix: {fix}")


def _column(conn: sqlalchemy.Connection, sql: str) -> list:
    return list(conn.execute(sqlalchemy.text(sql)).scalars())


_START_HINT = "fix: start a study with `prism-search run STUDY.toml --storage URL`, or point --storage at the database holding yours"


def open_storage(url: str, create: bool = True) -> optuna.storages.RDBStorage:
    """Optuna's RDBStorage on `url`, with heartbeats. `create=False` for reading commands (status, export, the
    dashboard...): the database must already hold Optuna's schema, and nothing is written to it."""
    _check_reachable(url)
    _check_schema(url, create)
    sqlite_file = _sqlite_file(url)
    if create and sqlite_file and not sqlite_file.exists():
        try:
            _new_wal_database(sqlite_file)
        except sqlite3.Error as e:
            raise StorageError(
                f"storage {mask_url(url)!r}: cannot create {str(sqlite_file)!r} ({e}); fix: a writable --storage path"
            ) from None
    engine_kwargs: dict = {"connect_args": _connect_args(url)}
    if not url.startswith("sqlite"):
        engine_kwargs |= {"pool_size": 2, "max_overflow": 2, "pool_pre_ping": True}
    try:
        storage = optuna.storages.RDBStorage(
            url,
            engine_kwargs=engine_kwargs,
            heartbeat_interval=HEARTBEAT_INTERVAL_S,
            grace_period=GRACE_PERIOD_S,
            skip_table_creation=not create,
        )
    except sqlalchemy.exc.DBAPIError as e:
        raise StorageError(
            f"storage {mask_url(url)!r} cannot be opened ({_first_line(e)}); fix: check --storage and its permissions"
        ) from None
    if sqlite_file:
        sqlalchemy.event.listen(storage.engine, "connect", _sqlite_sync_normal)
        storage.engine.dispose()  # the connections that created the schema predate the listener
    return storage
