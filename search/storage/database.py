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
import re
import sqlite3
import warnings
from collections.abc import Iterator
from pathlib import Path

import optuna
import sqlalchemy

from search.errors import StorageError

# the heartbeat arguments are marked experimental; they are what makes crash recovery possible
warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
# the driver records heartbeats itself (ask/tell has none of its own), which is what Optuna warns about
warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed to be used with Study.optimize")

# A trial whose driver sent no heartbeat for GRACE_PERIOD_S is taken as lost. Overridable from the environment
# (tests shorten them; a cluster on a slow network may lengthen them).
HEARTBEAT_INTERVAL_S = int(os.environ.get("PRISM_SEARCH_HEARTBEAT_S", 10))
GRACE_PERIOD_S = int(os.environ.get("PRISM_SEARCH_GRACE_S", 30))


def mask_url(url: str) -> str:
    """Hide a password in a database URL before it is printed anywhere."""
    return re.sub(r"(://[^:/@]+:)[^@]*@", r"\1***@", url)


def _check_reachable(url: str) -> None:
    if url.startswith("sqlite:///"):
        path = _sqlite_file(url)
        if path and not path.resolve().parent.is_dir():
            raise StorageError(f"storage {url!r}: folder {str(path.parent)!r} does not exist; create it or change --storage")
        return
    try:
        engine = sqlalchemy.create_engine(url, poolclass=sqlalchemy.pool.NullPool, connect_args=_connect_args(url))
    except (sqlalchemy.exc.ArgumentError, sqlalchemy.exc.NoSuchModuleError, ImportError) as e:
        raise StorageError(f"storage {mask_url(url)!r} is not a usable SQLAlchemy URL ({e}); e.g. sqlite:///prism_search.db") from None
    try:
        with engine.connect():
            pass
    except sqlalchemy.exc.OperationalError as e:
        reason = str(e.orig).strip().splitlines()[0] if e.orig else str(e)
        raise StorageError(f"storage {mask_url(url)!r} is unreachable ({reason}); start the database or fix --storage") from None
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

    PostgreSQL: a transaction-level advisory lock. SQLite (one machine): an exclusive file lock beside the file.
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
    elif path := _sqlite_file(url):
        _check_reachable(url)
        with open(f"{path}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield
    else:
        yield


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


def open_storage(url: str) -> optuna.storages.RDBStorage:
    _check_reachable(url)
    sqlite_file = _sqlite_file(url)
    if sqlite_file and not sqlite_file.exists():
        _new_wal_database(sqlite_file)
    engine_kwargs: dict = {"connect_args": _connect_args(url)}
    if not url.startswith("sqlite"):
        engine_kwargs |= {"pool_size": 2, "max_overflow": 2, "pool_pre_ping": True}
    storage = optuna.storages.RDBStorage(
        url,
        engine_kwargs=engine_kwargs,
        heartbeat_interval=HEARTBEAT_INTERVAL_S,
        grace_period=GRACE_PERIOD_S,
    )
    if sqlite_file:
        sqlalchemy.event.listen(storage.engine, "connect", _sqlite_sync_normal)
        storage.engine.dispose()  # the connections that created the schema predate the listener
    return storage
