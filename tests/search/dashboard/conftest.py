"""Studies for the dashboard tests, made in seconds through the Optuna API (tests.search.synthetic)."""

import optuna
import pytest

from search.config import load_config
from search.storage import open_storage
from tests.search.conftest import ROOT
from tests.search.synthetic import synthetic_study


def quickstart(name: str):
    return load_config(ROOT / "studies" / "quickstart.toml").model_copy(update={"name": name})


@pytest.fixture(scope="session")
def dash_url(tmp_path_factory) -> str:
    """One SQLite file, three studies: a prism study (with audits, a running and a failed trial), a two-objective
    one, and a plain Optuna study that prism-search did not create. Read-only for every test."""
    url = f"sqlite:///{tmp_path_factory.mktemp('dash') / 'dash.db'}"
    storage = open_storage(url)
    synthetic_study(quickstart("prism"), storage, 24, running=1, failed=1, audit=True)
    synthetic_study(quickstart("pareto"), storage, 10, failed=0, multi_objective=True, seed=1)
    plain = optuna.create_study(study_name="plain", storage=storage)
    plain.optimize(lambda t: t.suggest_float("x", -1, 1) ** 2, n_trials=3)
    storage.engine.dispose()  # now, not whenever it is collected: the last close folds the log into the file
    return url


@pytest.fixture
def memory_study():
    """A prism study in memory (no database): for the pure view and figure functions."""
    return synthetic_study(quickstart("mem"), None, 30, running=1, failed=1, audit=True)
