"""The public API's docstring examples run as written (Optuna's convention: every face shows a runnable example)."""

import doctest
import importlib
import inspect
import io
import re
import tokenize

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


# an issue number or a date in a comment or docstring says when or why-then, which a reader cannot use
_WHEN = re.compile(r"\b[Ii]ssue \d+|\b20\d\d-\d\d-\d\d\b")


def _when_marks(text: str) -> list[str]:
    """The issue numbers and dates in the comments and docstrings of Python source `text`."""
    found = []
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type == tokenize.COMMENT or (token.type == tokenize.STRING and token.string.lstrip("rbuRBU").startswith(('"""', "'''"))):
            found += [f"{token.start[0]}: {m.group()}" for m in _WHEN.finditer(token.string)]
    return found


def test_comments_and_docstrings_say_why_never_when_or_which_issue():
    marks = [
        f"{path.relative_to(ROOT)}:{mark}"
        for folder in ("prism", "search", "tests")
        for path in sorted((ROOT / folder).rglob("*.py"))
        for mark in _when_marks(path.read_text())
    ]
    assert not marks, "\n".join(marks)


def test_the_when_scan_finds_issue_numbers_and_dates():
    code = '"""Fixed (issue 25 item 3)."""\nx = 1  # as written until 2026-12-03\ny = "issue 4 in a plain string"\n'
    assert _when_marks(code) == ["1: issue 25", "2: 2026-12-03"]
