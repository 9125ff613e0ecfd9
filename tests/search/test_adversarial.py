"""The adversarial matrix (issue 25): bad input through the real CLI, each case one line on stderr naming the field,
exit code 2, before any compute, and nothing written (the working folder's files, a database included, untouched).

Each block below is one family of cases; append a case to its block, or add a block with a heading. Every case must
fail before training, so the whole matrix stays fast enough to run in CI.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from search.cli import main
from tests.search.conftest import ROOT

TINY = (ROOT / "studies" / "tiny.toml").read_text()


@dataclass(frozen=True)
class Case:
    """`args` of `prism-search`, run in a fresh folder holding `files` (name -> text; "T" is studies/tiny.toml with
    `edit` applied: (old, new) pairs); the one-line error must contain every one of `names`."""

    id: str
    args: tuple[str, ...]
    names: tuple[str, ...]
    edit: tuple[tuple[str, str], ...] = ()
    files: dict[str, str] = field(default_factory=dict)


def _tiny(edit: tuple[tuple[str, str], ...]) -> str:
    text = TINY
    for old, new in edit:
        assert old in text, old
        text = text.replace(old, new)
    return text


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() if p.is_file() else b"<dir>" for p in sorted(folder.rglob("*"))}


def run_case(case: Case, folder: Path, monkeypatch, capsys) -> None:
    (folder / "T").write_text(_tiny(case.edit))
    for name, text in case.files.items():
        (folder / name).write_text(text)
    before = _snapshot(folder)
    monkeypatch.chdir(folder)
    monkeypatch.setattr(sys, "argv", ["prism-search", *case.args])
    with pytest.raises(SystemExit) as done:
        main()
    out, err = capsys.readouterr()
    assert done.value.code == 2, (out, err)
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    for name in case.names:
        assert name in err, (name, err)
    assert _snapshot(folder) == before, "a refused command wrote or changed a file"


# --- issue 25 items 1-5 and 11: bad numbers, schedules, output paths --------------------------------------------------
NUMBERS_AND_PATHS = [
    Case("seed-negative", ("run", "T"), ("seed",), edit=(("seed = 0", "seed = -1"),)),
    Case("schedule-overflow", ("train", "1x99999999999999999999", "--config", "T"), ("1x99999999999999999999", "n_layer")),
    Case("schedule-billion-layers", ("train", "1x1000000000", "--config", "T"), ("1x1000000000", "n_layer=3")),
    Case("schedule-billion-no-config", ("train", "1x1000000000"), ("1x1000000000", "n_layer=6")),
    Case(
        "reference-billion-layers",
        ("run", "T"),
        ("space.references", "n_layer=3"),
        edit=(("baseline_seeds = 2", 'baseline_seeds = 2\n\n[space]\nreferences = ["1x1000000000"]'),),
    ),
    Case(
        "reference-named-billion-layers",
        ("run", "T"),
        ("space.references", "n_layer=3"),
        edit=(("baseline_seeds = 2", 'baseline_seeds = 2\n\n[space]\nreferences = ["w=1x99999999999999999999"]'),),
    ),
]


@pytest.mark.parametrize("case", NUMBERS_AND_PATHS, ids=lambda c: c.id)
def test_numbers_schedules_and_outputs(case, tmp_path, monkeypatch, capsys):
    run_case(case, tmp_path, monkeypatch, capsys)
