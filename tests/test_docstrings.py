"""The public API's docstring examples run as written (Optuna's convention: every face shows a runnable example)."""

import doctest
import importlib
import inspect

import pytest

from tests.search.conftest import ROOT

# the modules whose docstrings carry the examples a newcomer reads first
DOCUMENTED = ["search", "search.study.study", "search.runner.progress"]


@pytest.mark.parametrize("module", DOCUMENTED)
def test_the_docstring_examples_run(module, monkeypatch):
    monkeypatch.chdir(ROOT)  # the examples name studies/ relative to the repository, as the README's do
    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def test_every_public_method_of_study_says_what_it_returns():
    from search import Study

    public = [name for name in vars(Study) if not name.startswith("_")]
    assert {"create", "load", "all", "run", "resume", "confirm", "summary", "verdict", "trials", "best_schedule"} <= set(public)
    for name in public:
        assert inspect.getdoc(getattr(Study, name)), f"Study.{name} has no docstring"
    for name in ("create", "load", "run", "resume", "confirm"):
        assert "Returns:" in inspect.getdoc(getattr(Study, name)), f"Study.{name} does not say what it returns"
