"""A good prism study file that the storage tests copy and then damage."""

from pathlib import Path

import pytest

from search.storage import open_storage
from tests.search.dashboard.conftest import quickstart
from tests.search.synthetic import synthetic_study


@pytest.fixture(scope="session")
def good_db(tmp_path_factory) -> Path:
    """A prism study, created the way `run` creates storage (open_storage), trials added through Optuna."""
    path = tmp_path_factory.mktemp("good") / "good.db"
    storage = open_storage(f"sqlite:///{path}")
    synthetic_study(quickstart("s"), storage, 6, failed=0)
    storage.engine.dispose()  # closed: its write-ahead log is in the file, which can be copied alone
    assert not path.with_name("good.db-wal").exists()
    return path
