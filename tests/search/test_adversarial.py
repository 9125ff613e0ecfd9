"""The adversarial matrix: bad input through the real CLI, each case one line on stderr naming the field,
exit code 2, before any compute, and nothing written (the working folder's files, a database included, untouched).

Each block below is one family of cases; append a case to its block, or add a block with a heading. Every case must
fail before training, so the whole matrix stays fast enough to run in CI.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
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
    return {
        str(p.relative_to(folder)): p.read_bytes() if p.is_file() and p.stat().st_size < 2**20 else b"" for p in sorted(folder.rglob("*"))
    }


def make_file(path: Path, text: str) -> None:
    """`text`, or a special file: "<fifo>" a named pipe, "<sparse N>" a file of N bytes that takes no disk, "<sqlite>" a
    database with one table and row, "<symlink TARGET>" a link."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if text == "<sqlite>":
        with contextlib.closing(sqlite3.connect(path)) as db, db:
            db.execute("CREATE TABLE customers (name TEXT)")
            db.execute("INSERT INTO customers VALUES ('kept')")
    elif text.startswith("<symlink "):
        path.symlink_to(text.removeprefix("<symlink ").rstrip(">"))
    elif text == "<fifo>":
        os.mkfifo(path)
    elif text.startswith("<sparse "):
        with open(path, "wb") as f:
            f.truncate(int(text.removeprefix("<sparse ").rstrip(">")))
    else:
        path.write_text(text)


def run_case(case: Case, folder: Path, monkeypatch, capsys) -> None:
    (folder / "T").write_text(_tiny(case.edit))
    for name, text in case.files.items():
        make_file(folder / name, text)
    before = _snapshot(folder)
    before_mtimes = {p: p.stat().st_mtime_ns for p in folder.rglob("*")}
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
    assert {p: p.stat().st_mtime_ns for p in folder.rglob("*")} == before_mtimes, "a refused command rewrote a file"


# --- bad numbers, schedules, output paths --------------------------------------------------
NUMBERS_AND_PATHS = [
    Case("seed-negative", ("run", "T"), ("seed",), edit=(("seed = 0", "seed = -1"),)),
    Case("seed-past-numpy", ("run", "T"), ("seed", "less than"), edit=(("seed = 0", "seed = 4294967296"),)),
    Case("train-seed-past-numpy", ("train", "1x3", "--config", "T", "--seed", "18446744073709551616"), ("seed",)),
    Case(
        "baseline-seeds-huge",
        ("run", "T"),
        ("search.baseline_seeds", "less than"),
        edit=(("baseline_seeds = 2", "baseline_seeds = 99999999999999999999999"),),
    ),
    Case("lr-huge", ("run", "T"), ("train.lr", "less than"), edit=(("warmup_steps = 6", "warmup_steps = 6\nlr = 1e300"),)),
    Case("name-300-chars", ("run", "T"), ("name", "at most 100"), edit=(('name = "tiny"', f'name = "{"n" * 300}"'),)),
    Case("steps-float-huge", ("run", "T"), ("train.steps", "not an integer"), edit=(("steps = 60", "steps = 1e23"),)),
    Case("steps-int-huge", ("run", "T"), ("train.steps", "less than"), edit=(("steps = 60", "steps = 100000000000000000000000"),)),
    Case(
        "probe-steps-huge",
        ("run", "T"),
        ("search.throughput_probe_steps",),
        edit=(("baseline_seeds = 2", "baseline_seeds = 2\nthroughput_probe_steps = 1e23"),),
    ),
    Case("n-layer-float", ("run", "T"), ("model.n_layer", "not an integer"), edit=(("n_layer = 3", "n_layer = 3.0"),)),
    Case("n-layer-string", ("run", "T"), ("model.n_layer", "is a string"), edit=(("n_layer = 3", 'n_layer = "3"'),)),
    Case(
        "cpus-per-trial-past-machine",
        ("run", "T"),
        ("resources.cpus_per_trial=1000",),
        edit=(("workers = 2", "workers = 1\ncpus_per_trial = 1000"),),
    ),
    Case("workers-past-machine", ("run", "T", "--workers", "200"), ("resources.workers=200",)),
    Case("n-trials-past-bound", ("run", "T", "--n-trials", "10000000000"), ("n_trials", "less than")),
    Case("confirm-seeds-past-bound", ("confirm", "tiny", "--seeds", "1000"), ("--seeds",)),
    Case(
        "address-ray-client-nobody-answers",
        ("run", "T", "--address", "ray://127.0.0.1:1", "--storage", "postgresql+psycopg://postgres@127.0.0.1:5432/test"),
        ("--address ray://127.0.0.1:1", "no Ray head answers"),
    ),
    Case(
        "address-bad-port",
        ("run", "T", "--address", "10.0.0.5:99999", "--storage", "postgresql+psycopg://postgres@127.0.0.1:5432/test"),
        ("HOST:PORT",),
    ),
    Case(
        "address-nobody-answers",
        ("run", "T", "--address", "127.0.0.1:1", "--storage", "postgresql+psycopg://postgres@127.0.0.1:5432/test"),
        ("--address 127.0.0.1:1", "no Ray head answers"),
    ),
    Case(
        "corpus-device",
        ("run", "T"),
        ("data.corpus", "/dev/zero", "not a file"),
        edit=(("[search]", '[data]\ncorpus = "/dev/zero"\n\n[search]'),),
    ),
    Case(
        "corpus-fifo",
        ("run", "T"),
        ("data.corpus", "not a file"),
        edit=(("[search]", '[data]\ncorpus = "pipe"\n\n[search]'),),
        files={"pipe": "<fifo>"},
    ),
    Case(
        "corpus-larger-than-memory",
        ("run", "T"),
        ("data.corpus", "of text", "available"),
        edit=(("[search]", '[data]\ncorpus = "big.txt"\n\n[search]'),),
        files={"big.txt": f"<sparse {2**40}>"},
    ),
    Case("storage-in-memory", ("run", "T", "--storage", "sqlite://"), ("sqlite://", "in-memory")),
    Case(
        "storage-another-applications-database",
        ("run", "T", "--storage", "sqlite:///app.db"),
        ("another application's tables (customers)", "refusing to add Optuna's tables"),
        files={"app.db": "<sqlite>"},
    ),
    # item 1: an output path never replaces a database (a study's own, also through a link), a config or a checkpoint
    Case(
        "report-over-its-database",
        ("report", "tiny", "-o", "s.db", "--storage", "sqlite:///s.db"),
        ("-o 's.db' is a database",),
        files={"s.db": "<sqlite>"},
    ),
    Case(
        "report-through-link-to-database",
        ("report", "tiny", "-o", "r.html", "--storage", "sqlite:///s.db"),
        ("-o 'r.html' is a database",),
        files={"s.db": "<sqlite>", "r.html": "<symlink s.db>"},
    ),
    Case(
        "audit-over-database",
        ("audit", "tiny:0", "-o", "s.db", "--storage", "sqlite:///s.db"),
        ("-o 's.db' is a database",),
        files={"s.db": "<sqlite>"},
    ),
    Case(
        "audit-html-over-database",
        ("audit", "tiny:0", "--html", "s.db", "--storage", "sqlite:///s.db"),
        ("--html 's.db' is a database",),
        files={"s.db": "<sqlite>"},
    ),
    Case("report-over-config", ("report", "tiny", "-o", "T"), ("-o 'T' exists and is not a .html file",)),
    Case("prior-over-config", ("prior", "p.json", "T", "-o", "T"), ("-o 'T' exists and is not a .json file",)),
    Case(
        "train-save-over-checkpoint",
        ("train", "1x3", "--config", "T", "--save", "checkpoints/tiny/trial-00000"),
        ("--save", "already holds files"),
        files={"checkpoints/tiny/trial-00000/config.json": "{}"},
    ),
    # item 11: output paths that cannot be written are one line before any compute
    Case("report-to-folder", ("report", "tiny", "-o", "out"), ("-o 'out' is a folder",), files={"out/keep.txt": "x"}),
    Case("audit-to-folder", ("audit", "tiny:0", "-o", "out"), ("-o 'out' is a folder",), files={"out/keep.txt": "x"}),
    Case("audit-html-in-missing-folder", ("audit", "tiny:0", "--html", "missing/p.html"), ("--html 'missing/p.html'", "does not exist")),
    Case(
        "prior-malformed-zones",
        ("prior", "p.json", "T"),
        ("the profile's zones.0.depth is malformed", "write the profile again with `prism-search audit`"),
        files={"p.json": '{"format": "prism-profile/1", "n_layer": 3, "zones": [{"depth": "deep"}]}'},
    ),
    Case(
        "prior-zones-not-a-list",
        ("prior", "p.json", "T"),
        ("the profile's zones is malformed (Input should be a valid list)",),
        files={"p.json": '{"format": "prism-profile/1", "n_layer": 3, "zones": 7}'},
    ),
    Case("prior-to-device", ("prior", "p.json", "T", "-o", "/dev/full"), ("-o '/dev/full'", "not a file")),
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


def test_address_auto_where_no_head_answers(tmp_path, monkeypatch, capsys):
    """`auto` means $RAY_ADDRESS when set (else whatever cluster runs here, which a test cannot rule out)."""
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:1")
    args = ("run", "T", "--address", "auto", "--storage", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
    run_case(Case("address-auto", args, ("--address auto", "no Ray head answers at ", ":1 (")), tmp_path, monkeypatch, capsys)
