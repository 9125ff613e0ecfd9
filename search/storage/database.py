"""The one storage factory: a SQLAlchemy URL -> an Optuna RDBStorage with heartbeats, checked before use.

Only the driver process opens storage (workers never do), so SQLite sees a single writer and PostgreSQL a
handful of connections however many workers run. Heartbeats let a later `resume` find trials left RUNNING by
a driver that died.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import fcntl
import functools
import glob
import hashlib
import os
import re
import shutil
import socket
import sqlite3
import tempfile
import time
import urllib.parse
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

import optuna
import sqlalchemy

from search.errors import StorageError, StorageUnreachable
from search.outputs.urls import mask_in, mask_url, parse_url
from search.storage._optuna import CONTENT_DAMAGE, ReadingStorage, create_schema, damaged, schema_revisions, schema_tables

# the heartbeat arguments are marked experimental; they are what makes crash recovery possible
warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
# the driver records heartbeats itself (ask/tell has none of its own), which is what Optuna warns about
warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed to be used with Study.optimize")

# A trial whose driver sent no heartbeat for the grace period is taken as lost. Overridable from the environment
# (tests shorten them; a cluster on a slow network may lengthen them).
HEARTBEAT_DEFAULTS_S = {"PRISM_SEARCH_HEARTBEAT_S": 10, "PRISM_SEARCH_GRACE_S": 30}
CREATE_ATTEMPTS = 4  # opening a database whose schema another client is creating: tries, 0.5 s, 1 s, 1.5 s apart


def heartbeat_seconds() -> tuple[int, int]:
    """(heartbeat interval, grace period) from the environment, read when a storage opens (not at import: a bad
    value must not break `--help`), each a whole number of seconds >= 1."""
    values = []
    for variable, default in HEARTBEAT_DEFAULTS_S.items():
        text = os.environ.get(variable, str(default))
        if not text.strip().isascii() or not text.strip().isdigit() or int(text) < 1:
            raise StorageError(f"{variable}={text!r} is not a whole number of seconds >= 1; fix: unset it or set e.g. {default}")
        values.append(int(text))
    return values[0], values[1]


def check_url(url: str) -> None:
    """A malformed URL (a non-numeric port) would otherwise surface as a traceback from deep inside SQLAlchemy."""
    try:
        sqlalchemy.engine.make_url(url)
    except (sqlalchemy.exc.ArgumentError, ValueError) as e:
        raise StorageError(
            f"storage {mask_url(url)!r} is not a valid SQLAlchemy URL ({e}) (fix: e.g. sqlite:///prism_search.db or "
            "postgresql+psycopg://USER@HOST:5432/DB, the port a number)"
        ) from None


def check_lasting(url: str) -> None:
    """A study's storage must outlive the command: an in-memory SQLite database (`sqlite://`) would train every
    trial and then throw the results away."""
    check_url(url)
    if url.startswith("sqlite") and _sqlite_file(url) is None:
        raise StorageError(
            f"storage {mask_url(url)!r} is an in-memory database, gone when the command ends (fix: name a file, e.g. "
            "--storage sqlite:///prism_search.db)"
        )


def _check_reachable(url: str) -> None:
    check_url(url)
    if url.startswith("sqlite:///"):
        path = _sqlite_file(url)
        if path and not path.resolve().parent.is_dir():
            raise StorageError(f"storage {mask_url(url)!r}: folder {str(path.parent)!r} does not exist; create it or change --storage")
        return
    try:
        engine = sqlalchemy.create_engine(url, poolclass=sqlalchemy.pool.NullPool, **_engine_kwargs(url))
    except ImportError as e:  # a dialect SQLAlchemy knows, whose Python driver is not installed here
        raise StorageError(
            f"storage {mask_url(url)!r} needs the database driver {e.name or str(e)!r}, which is not installed (fix: install it into "
            "this environment, or use sqlite:///prism_search.db or postgresql+psycopg://, whose drivers prism-search brings)"
        ) from None
    except sqlalchemy.exc.NoSuchModuleError as e:  # a parsable URL naming a dialect SQLAlchemy does not know
        raise StorageError(f"storage {mask_url(url)!r} is not a valid SQLAlchemy URL ({e}) (fix: e.g. sqlite:///prism_search.db)") from None
    try:
        with engine.connect():
            pass
    except sqlalchemy.exc.OperationalError as e:
        reason = mask_in(_first_line(e), url)  # a driver's message may quote the password
        raise StorageUnreachable(f"storage {mask_url(url)!r} is unreachable ({reason}); start the database or fix --storage") from None
    finally:
        engine.dispose()


SQLITE_BUSY_TIMEOUT_S = 30  # wait out a concurrent reader instead of failing at SQLite's 5 s default


def _engine_kwargs(url: str, create: bool = True) -> dict:
    """How SQLAlchemy connects to `url`; reading commands (`create=False`) on a SQLite file in a folder this process
    cannot write connect as `_read_only_sqlite` says."""
    if url.startswith("sqlite"):
        path = _sqlite_file(url)
        if not create and path and path.exists() and not os.access(path.parent, os.W_OK | os.X_OK):
            reader = _read_only_sqlite(url, path)
            if reader:
                return {"creator": reader}
        return {"connect_args": {"timeout": SQLITE_BUSY_TIMEOUT_S}}
    if url.startswith("postgresql"):
        return {"connect_args": {"connect_timeout": 5}}
    return {}


def _read_only_sqlite(url: str, path: Path) -> Callable[[], sqlite3.Connection] | None:
    """A SQLite file in a folder nobody may write (a read-only disk, an archived study). A write-ahead-log
    database is read through its -shm index, which SQLite cannot create there. With no pending log (a closed
    study: the log folded into the file and removed) the file alone is the database: it is opened immutable, with
    no index and no locks, safe because a writer would keep a log beside it. A log with its index is read as the
    driver left them (None: SQLite's own read-only open does it). A log without its index is read from a private
    copy of the file and its log (`_private_copy`): nothing can write beside them, so the copy is the database."""
    wal, shm = path.with_name(f"{path.name}-wal"), path.with_name(f"{path.name}-shm")
    if not wal.exists() or wal.stat().st_size == 0:
        uri = f"file:{urllib.parse.quote(str(path.absolute()))}?immutable=1"
        return lambda: sqlite3.connect(uri, uri=True, check_same_thread=False)
    if shm.exists():
        return None
    try:
        copy = _private_copy(path.resolve(), wal.stat().st_mtime_ns, wal.stat().st_size)
    except OSError as e:
        raise StorageError(
            f"storage {mask_url(url)!r}: its write-ahead log {wal.name} holds commits SQLite reads only through an index "
            f"({shm.name}) it cannot create in the read-only folder {str(path.parent)!r}, and no private copy could be made "
            f"({e.strerror or e}); fix: make that folder writable, or copy {path.name} and {wal.name} to a writable folder "
            "and read the copy"
        ) from None
    uri = f"file:{urllib.parse.quote(str(copy))}?mode=ro"
    return lambda: sqlite3.connect(uri, uri=True, check_same_thread=False)


@functools.cache
def _private_copy(path: Path, _wal_mtime_ns: int, _wal_size: int) -> Path:
    """`path` and its -wal copied once per process (per state of the log) to a temporary folder removed at exit,
    where SQLite can make the index it reads the log through."""
    folder = Path(tempfile.mkdtemp(prefix="prism-search-read-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    for suffix in ("", "-wal"):
        shutil.copyfile(f"{path}{suffix}", folder / f"{path.name}{suffix}")
    return folder / path.name


@contextlib.contextmanager
def creation_lock(url: str) -> Iterator[None]:
    """Serialise schema and study creation across drivers: two `run`s at once create tables and enqueue a
    study's baselines once.

    PostgreSQL: a transaction-level advisory lock. SQLite needs none: `driver_lock`, held around it for the
    driver's life, already admits one driver per file.
    """
    if url.startswith("postgresql"):
        _check_reachable(url)
        engine = sqlalchemy.create_engine(url, poolclass=sqlalchemy.pool.NullPool, **_engine_kwargs(url))
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
    heartbeat_seconds()  # a bad setting, like a damaged file, fails before a lock file appears beside it
    _check_reachable(url)
    _check_schema(url, create=True)
    with _lock_file(url, f"{path.resolve()}.driver.lock") as lock:  # the real file's: a symlink or `./` is the same file
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
        lock.write(f"pid {os.getpid()} on {socket.gethostname()}")  # kept after it ends: `driver_ended` reads it
        lock.flush()
        yield


def driver_ended(url: str) -> int | None:
    """The process id of the last driver of the SQLite file at `url` when it is known to be gone: the process its
    driver lock names, on this machine, has ended (`kill -9` leaves the lock file naming it; the lock itself died
    with it). None where a
    live process holds it or this cannot tell (PostgreSQL, no lock file, a driver on another machine): the
    heartbeats tell then, after their grace period."""
    path = _sqlite_file(url)
    if path is None:
        return None
    try:
        holder = re.fullmatch(r"pid (\d+)(?: on (\S+))?", Path(f"{path.resolve()}.driver.lock").read_text().strip())
    except OSError:
        return None
    if holder is None or (holder[2] is not None and holder[2] != socket.gethostname()) or _process_alive(int(holder[1])):
        return None
    return int(holder[1])


def _lock_file(url: str, name: str) -> IO[str]:
    """A lock file beside a SQLite study (its content: who holds it)."""
    try:
        return open(name, "a+")
    except OSError as e:
        raise StorageError(f"storage {mask_url(url)!r}: cannot write {name} ({e.strerror}); fix: a writable --storage folder") from None


_LOCK_KEY = int.from_bytes(hashlib.sha256(b"prism-search creation").digest()[:8], "big", signed=True)
_SCHEMA_LOCK_KEY = int.from_bytes(hashlib.sha256(b"prism-search schema").digest()[:8], "big", signed=True)


def _new_postgresql_schema(url: str) -> None:
    """Create Optuna's schema on PostgreSQL whole or not at all: tables, version row and stamp in one transaction
    (PostgreSQL's DDL is transactional), under an advisory lock so concurrent drivers create it once. Optuna makes
    them in three transactions: a driver killed between them left tables without a stamp. A complete schema is
    left as it is; the lock is its own, apart from `creation_lock`'s, which a caller may hold around this."""
    engine = sqlalchemy.create_engine(url, poolclass=sqlalchemy.pool.NullPool, **_engine_kwargs(url))
    try:
        with engine.begin() as conn:
            conn.execute(sqlalchemy.text("SELECT pg_advisory_xact_lock(:key)"), {"key": _SCHEMA_LOCK_KEY})
            create_schema(conn)
    finally:
        engine.dispose()


def _sqlite_file(url: str) -> Path | None:
    """The file of a SQLite URL as the parser reads it (`?timeout=30` is no part of the name); None for memory."""
    parsed = parse_url(url) if url.startswith("sqlite:///") else None
    path = parsed.database if parsed else None
    return Path(path) if path and path != ":memory:" else None


def _new_sqlite_database(path: Path) -> None:
    """Create a study file whole or not at all: Optuna's schema is built in memory, written to an unnamed file in
    the folder (O_TMPFILE), which is then linked into place in one step. A driver killed (or a disk filled) at any
    point leaves nothing behind: an unnamed file goes with its process. A file another process created meanwhile
    is kept and used. Where the file system has no unnamed files, a named temporary file beside it stands in
    (one killed creation's, the next creation removes).

    The file is in write-ahead-log mode (a setting stored in the file): with synchronous=NORMAL a commit then no
    longer waits for an fsync (9 ms each here, and a trial makes dozens), readers such as a dashboard stop
    blocking the writer, and a killed driver still loses nothing it committed (only a power cut can drop the last
    commits). Existing files are left in the mode they have."""
    _remove_unfinished(path)
    image = _schema_image()
    unnamed = getattr(os, "O_TMPFILE", None)  # Linux
    try:
        fd = os.open(path.parent, unnamed | os.O_WRONLY, 0o666) if unnamed else None
    except OSError as e:
        if e.errno not in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL):
            raise
        fd = None
    if fd is None:
        _new_from_named_file(path, image)
        return
    try:
        _write_all(fd, image)
        root = os.open("/", os.O_RDONLY)  # linkat(AT_SYMLINK_FOLLOW) names the unnamed file through /proc
        try:
            os.link(f"/proc/self/fd/{fd}", path, src_dir_fd=root)
        except FileExistsError:
            pass
        except OSError as e:
            if e.errno not in (errno.ENOENT, errno.EXDEV, errno.EPERM):  # no /proc: name the file another way
                raise
            _new_from_named_file(path, image)
        finally:
            os.close(root)
    finally:
        os.close(fd)


def _schema_image() -> bytes:
    """The bytes of a new SQLite database holding Optuna's schema, in write-ahead-log mode: bytes 18 and 19 of a
    SQLite file are its write and read format versions, 2 meaning WAL (sqlite.org/fileformat.html)."""
    memory = sqlite3.connect(":memory:", check_same_thread=False)
    engine_kwargs = {"creator": lambda: memory, "poolclass": sqlalchemy.pool.StaticPool}
    storage = optuna.storages.RDBStorage("sqlite://", engine_kwargs=engine_kwargs)
    image = bytearray(memory.serialize())
    storage.engine.dispose()  # closes `memory` too
    image[18:20] = b"\x02\x02"
    return bytes(image)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    os.fsync(fd)


def _new_from_named_file(path: Path, image: bytes) -> None:
    """`_new_sqlite_database` where unnamed files cannot be made or named: a temporary file beside `path`, linked
    into place (renamed on a file system without hard links: a file made meanwhile is then replaced)."""
    temp = path.with_name(f"{_unfinished_prefix(path)}{os.getpid()}")
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
        try:
            _write_all(fd, image)
        finally:
            os.close(fd)
        try:
            os.link(temp, path)
        except FileExistsError:
            pass
        except OSError as e:
            if e.errno not in (errno.EPERM, errno.ENOTSUP):
                raise
            os.rename(temp, path)
    finally:
        temp.unlink(missing_ok=True)


def _unfinished_prefix(path: Path) -> str:
    return f".{path.name}.creating-"


def _remove_unfinished(path: Path) -> None:
    """Delete the temporary files of creations whose process is gone (killed before its `finally` ran), so killed
    runs leave nothing that accumulates; a live process's creation is left alone."""
    prefix = _unfinished_prefix(path)
    for leftover in path.parent.glob(f"{glob.escape(prefix)}*"):
        pid = leftover.name.removeprefix(prefix).split("-")[0]  # `PID`, `PID-wal`, `PID-shm`
        if pid.isdigit() and not _process_alive(int(pid)):
            leftover.unlink(missing_ok=True)


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


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
    engine = sqlalchemy.create_engine(url, poolclass=sqlalchemy.pool.NullPool, **_engine_kwargs(url, create))
    try:
        with engine.connect() as conn:
            tables = set(sqlalchemy.inspect(conn).get_table_names())
            revisions = _column(conn, "SELECT version_num FROM alembic_version") if "alembic_version" in tables else []
            versioned = "version_info" in tables and _column(conn, "SELECT count(*) FROM version_info") != [0]
    except sqlalchemy.exc.DBAPIError as e:
        raise StorageError(
            f"storage {masked!r} cannot be read as a database ({_first_line(e)}); fix: point --storage at a prism-search database"
        ) from None
    except CONTENT_DAMAGE as e:  # a damaged page of the schema itself (its table names)
        raise damaged(url, e) from None
    finally:
        engine.dispose()
    ours = schema_tables() | {"alembic_version"}
    others = f"another application's tables ({', '.join(sorted(tables)[:3])}{', ...' if len(tables) > 3 else ''})"
    if not tables & ours:
        if create and tables:
            raise StorageError(
                f"storage {masked!r} holds {others}; refusing to add Optuna's tables to it (fix: point --storage at a "
                "new database file or an empty database)"
            )
        if create:
            return
        what = f"only {others}" if tables else "no tables"
        raise StorageError(f"no prism-search studies in {masked}: the database holds {what} ({_START_HINT})")
    readable = bool(revisions) and all(isinstance(r, str) for r in revisions)  # a damaged page can read back as NULL
    missing = sorted(ours - tables) or ([] if readable and versioned else ["the rows naming its schema version"])
    if missing and not _holds_data(url, tables & schema_tables(), create):
        # an unfinished creation (a driver killed while making it, or another Optuna client making it right now),
        # not damage: Optuna completes a schema that stores nothing yet
        if create:
            return
        raise StorageError(f"no prism-search studies in {masked} yet: its Optuna schema is not complete ({_START_HINT})")
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


def _holds_data(url: str, tables: set[str], create: bool) -> bool:
    """Whether any of Optuna's `tables` (bar the schema's own version row) holds a row: a study, trial or attr."""
    engine = sqlalchemy.create_engine(url, poolclass=sqlalchemy.pool.NullPool, **_engine_kwargs(url, create))
    try:
        with engine.connect() as conn:
            return any(_column(conn, f"SELECT 1 FROM {table} LIMIT 1") for table in sorted(tables - {"version_info"}))
    finally:
        engine.dispose()


def _column(conn: sqlalchemy.Connection, sql: str) -> list:
    return list(conn.execute(sqlalchemy.text(sql)).scalars())


_START_HINT = "fix: start a study with `prism-search run STUDY.toml --storage URL`, or point --storage at the database holding yours"


def open_storage(url: str, create: bool = True) -> optuna.storages.RDBStorage:
    """Optuna's RDBStorage on `url`, with heartbeats. `create=False` for reading commands (status, export, the
    dashboard...): the database must already hold Optuna's schema, and nothing is written to it."""
    heartbeat_s, grace_s = heartbeat_seconds()
    _check_reachable(url)
    _check_schema(url, create)
    sqlite_file = _sqlite_file(url)
    if create and sqlite_file and not sqlite_file.exists():
        try:
            _new_sqlite_database(sqlite_file)
        except (sqlite3.Error, sqlalchemy.exc.DBAPIError, OSError) as e:
            raise StorageError(
                f"storage {mask_url(url)!r}: cannot create {str(sqlite_file)!r} ({_first_line(e)}); fix: a writable --storage "
                "path with free space"
            ) from None
    if create and url.startswith("postgresql"):
        try:
            _new_postgresql_schema(url)
        except sqlalchemy.exc.DBAPIError as e:
            raise StorageError(
                f"storage {mask_url(url)!r}: cannot create Optuna's schema ({_first_line(e)}); fix: check --storage and its permissions"
            ) from None
    engine_kwargs = _engine_kwargs(url, create)
    if not url.startswith("sqlite"):
        engine_kwargs |= {"pool_size": 2, "max_overflow": 2, "pool_pre_ping": True}
    for attempt in range(CREATE_ATTEMPTS):
        try:
            storage = (optuna.storages.RDBStorage if create else ReadingStorage)(
                url,
                engine_kwargs=engine_kwargs,
                heartbeat_interval=heartbeat_s,
                grace_period=grace_s,
                skip_table_creation=not create,
                # a reader's schema revision was compared with the head above (Optuna's own check re-reads every
                # alembic script: 0.1 s of each reading command)
                skip_compatibility_check=not create,
            )
            break
        except sqlalchemy.exc.DBAPIError as e:
            # another Optuna client creating the same tables at this moment ("table already exists", a duplicate
            # version row): once it is done, Optuna finds the complete schema
            if create and attempt + 1 < CREATE_ATTEMPTS:
                time.sleep(0.5 * (attempt + 1))
                continue
            raise StorageError(
                f"storage {mask_url(url)!r} cannot be opened ({_first_line(e)}); fix: check --storage and its permissions"
            ) from None
    if sqlite_file:
        sqlalchemy.event.listen(storage.engine, "connect", _sqlite_sync_normal)
        storage.engine.dispose()  # the connections that created the schema predate the listener
    return storage
