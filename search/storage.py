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
import warnings
from pathlib import Path
from typing import Iterator

import optuna
import sqlalchemy

from search.config import PrismSearchError

# the heartbeat arguments are marked experimental; they are what makes crash recovery possible
warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
# the driver records heartbeats itself (ask/tell has none of its own), which is what Optuna warns about
warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed to be used with Study.optimize")

# A trial whose driver sent no heartbeat for GRACE_PERIOD_S is taken as lost. Overridable from the environment
# (tests shorten them; a cluster on a slow network may lengthen them).
HEARTBEAT_INTERVAL_S = int(os.environ.get("PRISM_SEARCH_HEARTBEAT_S", 10))
GRACE_PERIOD_S = int(os.environ.get("PRISM_SEARCH_GRACE_S", 30))


class StorageError(PrismSearchError):
    pass


def mask_url(url: str) -> str:
    """Hide a password in a database URL before it is printed anywhere."""
    return re.sub(r"(://[^:/@]+:)[^@]*@", r"\1***@", url)


def _check_reachable(url: str) -> None:
    if url.startswith("sqlite:///"):
        path = url.removeprefix("sqlite:///")
        if path and path != ":memory:" and not Path(path).resolve().parent.is_dir():
            raise StorageError(f"storage {url!r}: folder {str(Path(path).parent)!r} does not exist; create it or change --storage")
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
    elif url.startswith("sqlite:///") and url != "sqlite:///:memory:":
        _check_reachable(url)
        with open(url.removeprefix("sqlite:///") + ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield
    else:
        yield


_LOCK_KEY = int.from_bytes(hashlib.sha256(b"prism-search creation").digest()[:8], "big", signed=True)


def open_storage(url: str) -> optuna.storages.RDBStorage:
    _check_reachable(url)
    engine_kwargs: dict = {"connect_args": _connect_args(url)}
    if not url.startswith("sqlite"):
        engine_kwargs |= {"pool_size": 2, "max_overflow": 2, "pool_pre_ping": True}
    return optuna.storages.RDBStorage(
        url,
        engine_kwargs=engine_kwargs,
        heartbeat_interval=HEARTBEAT_INTERVAL_S,
        grace_period=GRACE_PERIOD_S,
    )
