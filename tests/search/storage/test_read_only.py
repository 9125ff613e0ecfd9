"""Reading commands never create or change storage; empty, foreign, damaged and corrupt databases are one line.

Every case runs the real CLI (main(), in this process) on a real SQLite file or PostgreSQL database, and compares
the storage afterwards with what it was before: bytes for SQLite, the table list for PostgreSQL.
"""

import contextlib
import hashlib
import shutil
import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy

from search.cli import main
from search.dashboard import Dashboard
from search.storage import open_storage
from tests.search.conftest import ROOT, make_read_only, small_file_system
from tests.search.dashboard.conftest import quickstart
from tests.search.synthetic import synthetic_study
from tests.search.test_cli_errors import run_cli

READERS = [
    ["status"],
    ["status", "s"],
    ["best", "s"],
    ["export", "s"],
    ["resume", "s"],
    ["audit", "s:1"],
    ["report", "s", "-o", "report.html"],
    ["dashboard", "--port", "0"],
    ["dashboard", "--optuna", "--port", "0"],
]


def cli(monkeypatch, capsys, cwd: Path, *args: str) -> tuple[int, str]:
    monkeypatch.chdir(cwd)
    monkeypatch.setattr(sys, "argv", ["prism-search", *args])
    with pytest.raises(SystemExit) as done:
        main()
    out = capsys.readouterr()
    assert out.out == "", out.out
    return done.value.code, out.err


def assert_one_line(code: int, err: str, fragment: str) -> None:
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    assert fragment in err, err


def snapshot(folder: Path) -> dict[str, str]:
    """Every file under `folder` with the hash of its bytes (folders by name)."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir" for p in folder.rglob("*")}


def test_reading_commands_in_an_empty_folder_create_nothing(monkeypatch, capsys, tmp_path):
    for args in READERS:
        assert_one_line(*cli(monkeypatch, capsys, tmp_path, *args), "no prism-search studies in sqlite:///prism_search.db")
        assert list(tmp_path.iterdir()) == [], args


def edit(path: Path, *statements: str) -> None:
    """Run SQL on a file and close it: SQLite folds the write-ahead log into the file on the last close."""
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        for sql in statements:
            conn.execute(sql)


def foreign(path: Path) -> None:
    edit(path, "CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)", "INSERT INTO customers (name) VALUES ('ada')")


def missing_table(path: Path, good: Path) -> None:
    shutil.copy(good, path)
    edit(path, "DROP TABLE trial_values")


def revision(number: str):
    def make(path: Path, good: Path) -> None:
        shutil.copy(good, path)
        edit(path, f"UPDATE alembic_version SET version_num = '{number}'")

    return make


def truncated(path: Path, good: Path) -> None:
    path.write_bytes(good.read_bytes()[: good.stat().st_size // 3])


DAMAGED = {  # name: (make it beside a good database, the words of its one line)
    "foreign": (lambda path, good: foreign(path), "only another application's tables (customers"),
    "empty file": (lambda path, good: path.write_bytes(b""), "no prism-search studies"),
    "missing table": (missing_table, "damaged Optuna database: it lacks trial_values"),
    "unknown revision": (revision("v99.0.0.z"), "schema revision v99.0.0.z, this Optuna reads"),
    "old revision": (revision("v3.0.0.a"), "optuna storage upgrade --storage"),
    "truncated": (truncated, "cannot be read as a database"),
    "garbage": (lambda path, good: path.write_bytes(bytes(range(256)) * 40), "cannot be read as a database (file is not a database)"),
    "a directory": (lambda path, good: path.mkdir(), "cannot be read as a database (unable to open database file)"),
}


@pytest.mark.parametrize("kind", DAMAGED)
def test_damaged_or_foreign_sqlite_is_one_line_for_every_command_and_stays_byte_identical(monkeypatch, capsys, tmp_path, good_db, kind):
    make, fragment = DAMAGED[kind]
    db = tmp_path / "data" / "x.db"
    db.parent.mkdir()
    make(db, good_db)
    url = f"sqlite:///{db}"
    before = snapshot(db.parent)
    starts = kind in ("foreign", "empty file")  # `run` may start a study where Optuna has no tables yet
    for args in READERS + ([] if starts else [["run", str(ROOT / "studies" / "tiny.toml")]]):
        assert_one_line(*cli(monkeypatch, capsys, tmp_path, *args, "--storage", url), fragment)
        assert snapshot(db.parent) == before, args
    if not starts:
        status, html = get_page(Dashboard(url), "/")
        assert status == "503 Service Unavailable" and fragment.split(" (")[0] in html and "Traceback" not in html
        assert snapshot(db.parent) == before


def get_page(app, path: str) -> tuple[str, str]:
    status = []
    body = b"".join(app({"REQUEST_METHOD": "GET", "PATH_INFO": path, "QUERY_STRING": ""}, lambda s, h: status.append(s)))
    return status[0], body.decode()


@pytest.mark.parametrize("path, fragment", [("/proc/prism.db", "no database file at '/proc/prism.db'"), ("/proc/self/status", "")])
def test_a_path_under_proc_is_one_line(monkeypatch, capsys, tmp_path, path, fragment):
    for args in (["status"], ["export", "s"]):
        assert_one_line(*cli(monkeypatch, capsys, tmp_path, *args, "--storage", f"sqlite:///{path}"), fragment)
    toml = ROOT / "studies" / "tiny.toml"
    code, err = cli(monkeypatch, capsys, tmp_path, "run", str(toml), "--storage", "sqlite:////proc/prism.db")
    assert_one_line(code, err, "/proc/prism.db")
    assert list(tmp_path.iterdir()) == []


def test_reading_a_good_database_changes_none_of_its_bytes(monkeypatch, capsys, tmp_path, good_db):
    db = tmp_path / "copy.db"
    shutil.copy(good_db, db)
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    for args in (["status"], ["best", "s"], ["export", "s", "--format", "json"]):
        monkeypatch.setattr(sys, "argv", ["prism-search", *args, "--storage", f"sqlite:///{db}"])
        with pytest.raises(SystemExit) as done:
            main()
        assert done.value.code == 0, capsys.readouterr().err
    assert '"schedule"' in capsys.readouterr().out
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before


def tables(url: str) -> set[str]:
    engine = sqlalchemy.create_engine(url, poolclass=sqlalchemy.pool.NullPool)
    try:
        return set(sqlalchemy.inspect(engine).get_table_names())
    finally:
        engine.dispose()


def test_reading_commands_never_create_optunas_tables_on_postgresql(monkeypatch, capsys, tmp_path, pg_url):
    readers = [a for a in READERS if a[0] != "audit"]  # audit imports torch: covered on SQLite
    for args in readers:
        assert_one_line(*cli(monkeypatch, capsys, tmp_path, *args, "--storage", pg_url), "the database holds no tables")
    status, html = get_page(Dashboard(pg_url), "/")
    assert status == "503 Service Unavailable" and "no prism-search studies" in html
    assert tables(pg_url) == set()
    engine = sqlalchemy.create_engine(pg_url, poolclass=sqlalchemy.pool.NullPool)
    with engine.begin() as conn:
        conn.execute(sqlalchemy.text("CREATE TABLE customers (id serial PRIMARY KEY)"))
    engine.dispose()
    for args in readers:
        assert_one_line(*cli(monkeypatch, capsys, tmp_path, *args, "--storage", pg_url), "another application's tables (customers")
    assert tables(pg_url) == {"customers"} and list(tmp_path.iterdir()) == []


def test_a_postgresql_study_missing_a_table_is_not_repaired_by_export(monkeypatch, capsys, tmp_path, pg_url):
    synthetic_study(quickstart("s"), open_storage(pg_url), 4, failed=0)
    engine = sqlalchemy.create_engine(pg_url, poolclass=sqlalchemy.pool.NullPool)
    with engine.begin() as conn:
        conn.execute(sqlalchemy.text("DROP TABLE trial_intermediate_values"))
    engine.dispose()
    before = tables(pg_url)
    for args in (["export", "s"], ["status"], ["resume", "s"]):
        assert_one_line(*cli(monkeypatch, capsys, tmp_path, *args, "--storage", pg_url), "it lacks trial_intermediate_values")
    assert tables(pg_url) == before


@pytest.mark.parametrize(
    "url, fragment",
    [
        ("nonsense", "is not a valid SQLAlchemy URL"),
        ("sqlite:///missing/x.db", "folder 'missing' does not exist"),
        ("postgresql+psycopg://u:s3cret@127.0.0.1:abc/db", "is not a valid SQLAlchemy URL"),
        ("postgresql+psycopg://u:s3cret@127.0.0.1:1/db", "is unreachable"),
        ("sqlite://", "no prism-search studies in sqlite://"),
        ("sqlite:///:memory:", "no prism-search studies"),
    ],
)
def test_a_bad_storage_url_is_one_line_for_every_reading_command(monkeypatch, capsys, tmp_path, url, fragment):
    readers = [a for a in READERS if not (a[0] == "dashboard" and "unreachable" in fragment)]  # served: it may come back
    for args in readers:
        code, err = cli(monkeypatch, capsys, tmp_path, *args, "--storage", url)
        assert_one_line(code, err, fragment)
        assert "s3cret" not in err
    assert list(tmp_path.iterdir()) == []


@pytest.fixture
def read_only_layouts(tmp_path, good_db) -> Iterator[Path]:
    """One study in three write-ahead-log layouts on a read-only file system, each in its folder:
    `closed` (the log folded in, no -wal/-shm: how a finished study is archived), `open` (-wal and -shm as an open
    driver left them, the study only in the log) and `log only` (the -wal without its -shm)."""
    source = tmp_path / "source" / "s.db"
    source.parent.mkdir()
    storage = open_storage(f"sqlite:///{source}")
    sqlalchemy.event.listen(storage.engine, "connect", lambda conn, _: conn.execute("PRAGMA wal_autocheckpoint=0"))
    storage.engine.dispose()  # the study below stays in the log while the engine is open
    synthetic_study(quickstart("s"), storage, 6, failed=0)
    with small_file_system(tmp_path / "ro", "16m") as disk:
        for layout, suffixes in {"closed": [], "open": ["-wal", "-shm"], "log only": ["-wal"]}.items():
            (disk / layout).mkdir()
            shutil.copy(good_db if layout == "closed" else source, disk / layout / "s.db")
            for suffix in suffixes:
                shutil.copy(f"{source}{suffix}", disk / layout / f"s.db{suffix}")
        storage.engine.dispose()
        make_read_only(disk)
        yield disk


READING = [["status", "s"], ["best", "s"], ["export", "s"], ["report", "s", "-o", "report.html"]]


@pytest.mark.parametrize("layout", ["closed", "open", "log only"])
def test_a_read_only_wal_database_is_read_by_every_reading_command(monkeypatch, capsys, tmp_path, read_only_layouts, layout):
    """`log only`: SQLite cannot make the index it reads the log through there; the log is read from a private copy."""
    url = f"sqlite:///{read_only_layouts / layout / 's.db'}"
    for args in READING:
        code, out, err = run_cli(monkeypatch, capsys, tmp_path, *args, "--storage", url)
        assert code == 0 and err == "" and ("wrote report.html" if args[0] == "report" else "1x2,2x1,4x1") in out, (args, err)
    status, html = get_page(Dashboard(url), "/study/s")
    assert status == "200 OK" and "1x2,2x1,4x1" in html
