"""Creating a database is atomic: a driver killed half-way, a disk that fills, or a stock Optuna
client creating the same schema at the same moment never leaves a database that is called damaged."""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import time

import optuna
import pytest
import sqlalchemy
from optuna.storages._rdb import models

from search.errors import StorageError
from search.storage import open_storage
from tests.search.conftest import ROOT

KILL_MID_CREATION = """
import os, signal, sys
from optuna.storages._rdb import storage
def die(self):  # the tables exist, the Alembic stamp does not: a driver killed here
    os.kill(os.getpid(), signal.SIGKILL)
storage._VersionManager._init_alembic = die
from search.storage import open_storage
open_storage(sys.argv[1])
"""


def _cli(*args: str, cwd) -> subprocess.CompletedProcess:
    env = os.environ | {"PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "search.cli", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


KILL_WHILE_WRITING = """
import os, signal, sys
def die(fd):  # the new database's bytes are written, not yet on disk nor named: a driver killed here
    os.kill(os.getpid(), signal.SIGKILL)
os.fsync = die
from search.storage import open_storage
open_storage(sys.argv[1])
"""


def _killed_mid_creation(url: str, script: str = KILL_MID_CREATION) -> None:
    env = os.environ | {"PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", script, url], env=env, capture_output=True, timeout=120)
    assert done.returncode == -signal.SIGKILL, done.stderr


@pytest.mark.parametrize("script", [KILL_MID_CREATION, KILL_WHILE_WRITING], ids=["making the schema", "writing the file"])
def test_a_driver_killed_while_creating_the_database_leaves_none(tmp_path, script):
    """Nothing at all: no database, no temporary `.s.db.creating-PID` (the file is unnamed until it is whole)."""
    url = f"sqlite:///{tmp_path / 's.db'}"
    _killed_mid_creation(url, script)
    assert list(tmp_path.iterdir()) == []
    status = _cli("status", "--storage", url, cwd=tmp_path)
    assert status.returncode == 2 and "no database file" in status.stderr and "damaged" not in status.stderr
    _killed_mid_creation(url)
    open_storage(url).engine.dispose()  # the next run creates it whole, and clears what the killed ones left
    assert optuna.get_all_study_summaries(url) == []
    assert [p.name for p in tmp_path.iterdir() if "creating" in p.name] == []


KILL_AT_THE_STAMP = """
import os, signal, sys
from alembic.runtime import migration
def die(self, *args, **kwargs):  # the tables and version row are made, the Alembic stamp not yet: a driver killed here
    os.kill(os.getpid(), signal.SIGKILL)
migration.MigrationContext.stamp = die
from search.storage import open_storage
open_storage(sys.argv[1])
"""


def test_a_driver_killed_while_creating_a_postgresql_schema_leaves_nothing(tmp_path, pg_url):
    """The schema is made in one transaction: killed before it commits, the database holds no table at all (Optuna
    alone commits its tables first and stamps them after, so a kill between left a schema without its stamp)."""
    _killed_mid_creation(pg_url, KILL_AT_THE_STAMP)
    engine = sqlalchemy.create_engine(pg_url, poolclass=sqlalchemy.pool.NullPool)
    assert sqlalchemy.inspect(engine).get_table_names() == []
    engine.dispose()
    status = _cli("status", "--storage", pg_url, cwd=tmp_path)
    assert status.returncode == 2 and "holds no tables" in status.stderr and "damaged" not in status.stderr, status.stderr
    open_storage(pg_url).engine.dispose()
    assert _cli("status", "--storage", pg_url, cwd=tmp_path).returncode == 0


def test_postgresql_schemas_created_at_once_by_many_drivers_are_one(pg_url):
    """Eight processes open a new database at the same moment: the advisory lock lets one create the schema, the
    others find it whole (no duplicate version row, one stamp)."""
    env = os.environ | {"PYTHONPATH": str(ROOT)}
    script = "import sys; from search.storage import open_storage; open_storage(sys.argv[1]).engine.dispose()"
    procs = [subprocess.Popen([sys.executable, "-c", script, pg_url], env=env, stderr=subprocess.PIPE, text=True) for _ in range(8)]
    errors = [p.communicate(timeout=120)[1] for p in procs]
    assert [p.returncode for p in procs] == [0] * 8, errors
    engine = sqlalchemy.create_engine(pg_url, poolclass=sqlalchemy.pool.NullPool)
    with engine.connect() as conn:
        counts = [conn.execute(sqlalchemy.text(f"SELECT count(*) FROM {t}")).scalar() for t in ("version_info", "alembic_version")]
    engine.dispose()
    assert counts == [1, 1]


def test_a_schema_left_half_made_by_an_older_driver_is_completed_not_damaged(tmp_path):
    """What a killed creation left before creation was atomic (and what another client mid-creation shows): some of
    Optuna's tables, no studies, no version stamp. Nothing is stored in it, so it is not damage."""
    path = tmp_path / "s.db"
    engine = sqlalchemy.create_engine(f"sqlite:///{path}")
    models.BaseModel.metadata.tables["studies"].create(engine)
    models.BaseModel.metadata.tables["trials"].create(engine)
    engine.dispose()
    status = _cli("status", "--storage", f"sqlite:///{path}", cwd=tmp_path)
    assert status.returncode == 2 and "not complete" in status.stderr and "damaged" not in status.stderr, status.stderr
    open_storage(f"sqlite:///{path}").engine.dispose()
    assert _cli("status", "--storage", f"sqlite:///{path}", cwd=tmp_path).returncode == 0


def test_a_half_made_schema_that_holds_a_study_is_still_damage(tmp_path):
    path = tmp_path / "s.db"
    optuna.create_study(study_name="kept", storage=f"sqlite:///{path}")
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("DROP TABLE alembic_version")
    with pytest.raises(StorageError, match="damaged Optuna database: it lacks alembic_version"):
        open_storage(f"sqlite:///{path}")


def test_a_full_disk_while_creating_is_one_error_and_leaves_no_file(full_disk):
    """A real full file system (a filled tmpfs): the write of the new file fails, and nothing is left of it."""
    before = sorted(full_disk.iterdir())
    with pytest.raises(StorageError, match=r"cannot create .*No space left on device"):
        open_storage(f"sqlite:///{full_disk / 's.db'}")
    assert sorted(full_disk.iterdir()) == before


STOCK_CLIENT_PAUSED_MID_CREATION = """
import pathlib, sys, time
import optuna
from optuna.storages._rdb import storage
stamp = storage._VersionManager._init_alembic
def slow_stamp(self):  # the tables exist; the stock client stops here while prism-search opens the database
    pathlib.Path(sys.argv[2]).touch()
    time.sleep(3)
    stamp(self)
storage._VersionManager._init_alembic = slow_stamp
optuna.create_study(study_name="stock", storage=sys.argv[1])
"""


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_a_stock_optuna_client_creating_the_schema_at_the_same_moment_is_no_damage(tmp_path, backend, request):
    """A real stock client, held (by a pause in its own process) between making the tables and stamping them."""
    url = f"sqlite:///{tmp_path / 's.db'}" if backend == "sqlite" else request.getfixturevalue("pg_url")
    ready = tmp_path / "paused"
    env = os.environ | {"PYTHONPATH": str(ROOT)}
    stock = subprocess.Popen([sys.executable, "-c", STOCK_CLIENT_PAUSED_MID_CREATION, url, str(ready)], env=env)
    try:
        deadline = time.monotonic() + 60
        while not ready.exists() and stock.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ready.exists(), "the stock client never reached its pause"
        open_storage(url).engine.dispose()
        assert stock.wait(60) == 0
    finally:
        stock.kill()
    assert [s.study_name for s in optuna.get_all_study_summaries(url)] == ["stock"]
