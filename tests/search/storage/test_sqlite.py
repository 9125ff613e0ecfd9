"""SQLite study files: new ones use a write-ahead log (commits without fsync), existing ones are left alone."""

import sqlite3

import optuna

from search.storage import open_storage


def _journal_mode(path) -> str:
    with sqlite3.connect(path) as conn:
        return conn.execute("PRAGMA journal_mode").fetchone()[0]


def test_new_study_file_uses_a_write_ahead_log_and_keeps_what_it_committed(tmp_path):
    path = tmp_path / "new.db"
    storage = open_storage(f"sqlite:///{path}")
    with storage.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 1  # NORMAL: sync at checkpoints only
    study = optuna.create_study(study_name="s", storage=storage)
    study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=3)
    assert _journal_mode(path) == "wal"
    storage.engine.dispose()
    assert len(optuna.load_study(study_name="s", storage=f"sqlite:///{path}").trials) == 3  # a fresh reader sees all


def test_existing_file_keeps_its_journal_mode(tmp_path):
    path = tmp_path / "old.db"
    optuna.create_study(study_name="old", storage=f"sqlite:///{path}")
    open_storage(f"sqlite:///{path}").engine.dispose()
    assert _journal_mode(path) == "delete"
