"""Damaged content, not a damaged file: a SQLite database that opens and has the complete schema, but holds text
that is not UTF-8, an attribute that is not JSON or a NULL objective value. Damage in the schema itself is the
whole storage's one-line error (exit 2); damage inside a study makes that study unreadable, named with its trial
and field: every command naming it says so in one line (exit 2), `status` of the whole storage names it and
reads on, and the dashboard's pages say what is damaged, and read the study again once the file is replaced.
tests/search/storage/test_damage_matrix.py has every kind of damaged value beside an intact study."""

import html
import random
import shutil
import sys
from pathlib import Path

import pytest

from search.cli import main
from search.dashboard import Dashboard
from tests.search.storage.test_read_only import assert_one_line, cli, edit, get_page, snapshot

READERS = [["status", "s"], ["best", "s"], ["export", "s"], ["report", "s", "-o", "report.html"], ["audit", "s:1"]]


def undecodable_table_name(path: Path) -> None:
    """Bytes that are not UTF-8 where the schema (sqlite_master) stores a table's name: SQLite still opens the file."""
    data = bytearray(path.read_bytes())
    at = data.find(b"trial_heartbeats")
    data[at : at + 4] = bytes(range(0x80, 0x84))
    path.write_bytes(data)


DAMAGE = {  # name: (damage a copy of a good database, the words of its one line)
    "table name not UTF-8": (undecodable_table_name, "damaged database: it holds text that is not UTF-8"),
    "attribute not JSON": (
        lambda path: edit(path, "UPDATE trial_user_attributes SET value_json = '{not json' WHERE key = 'schedule'"),
        "study 's' is unreadable: trial 0's user attr 'schedule' holds '{not json', not JSON",
    ),
    "NULL trial value": (
        lambda path: edit(path, "UPDATE trial_values SET value = NULL"),
        "study 's' is unreadable: trial 0's value of objective 0 is NULL",
    ),
}
IN_A_STUDY = ["attribute not JSON", "NULL trial value"]


def damaged_copy(good: Path, folder: Path, kind: str) -> Path:
    folder.mkdir(exist_ok=True)
    db = folder / "x.db"
    shutil.copy(good, db)
    DAMAGE[kind][0](db)
    return db


@pytest.mark.parametrize("kind", DAMAGE)
def test_damaged_content_is_one_line_for_every_reading_command_and_stays_byte_identical(monkeypatch, capsys, tmp_path, good_db, kind):
    db = damaged_copy(good_db, tmp_path / "data", kind)
    before = snapshot(db.parent)
    for args in READERS + ([] if kind in IN_A_STUDY else [["status"]]):
        assert_one_line(*cli(monkeypatch, capsys, tmp_path, *args, "--storage", f"sqlite:///{db}"), DAMAGE[kind][1])
        assert snapshot(db.parent) == before, args
    assert not (tmp_path / "report.html").exists()


@pytest.mark.parametrize("kind", IN_A_STUDY)
def test_status_of_the_whole_storage_names_the_unreadable_study_and_goes_on(monkeypatch, capsys, tmp_path, good_db, kind):
    db = damaged_copy(good_db, tmp_path / "data", kind)
    monkeypatch.setattr(sys, "argv", ["prism-search", "status", "--storage", f"sqlite:///{db}"])
    with pytest.raises(SystemExit) as done:
        main()
    err = capsys.readouterr().err
    assert (
        done.value.code == 0
        and err
        == f"study s left out: {DAMAGE[kind][1]}; fix: restore the study from a backup (the other studies of the storage read as usual)\n"
    )


@pytest.mark.parametrize("kind", IN_A_STUDY)
def test_dashboard_pages_say_what_is_damaged_and_recover_when_the_file_is_replaced(tmp_path, good_db, kind):
    db = damaged_copy(good_db, tmp_path, kind)
    app = Dashboard(f"sqlite:///{db}")
    for path in ("/", "/study/s", "/study/s/trial/1"):
        status, page = get_page(app, path)
        assert status == "200 OK" and DAMAGE[kind][1] in html.unescape(page) and "Traceback" not in page, (path, status)
    shutil.copy(good_db, tmp_path / "restored.db")
    (tmp_path / "restored.db").replace(db)  # the backup put back in place, as an operator would
    for path in ("/", "/study/s", "/study/s/trial/1", "/api/stamp"):
        status, page = get_page(app, path)
        assert status == "200 OK" and "is unreadable" not in page, path
    app.close()


def test_thirty_random_bytes_in_the_second_half_are_an_answer_or_one_line(monkeypatch, capsys, tmp_path, good_db):
    """The hostile user's recipe, on many positions: whatever page the bytes hit, `status` answers or fails in one
    line (some positions hit nothing `status` reads)."""
    clean = good_db.read_bytes()
    db = tmp_path / "x.db"
    failed = 0
    for seed in range(30):
        rng = random.Random(seed)
        at = rng.randrange(len(clean) // 2, len(clean) - 30)
        db.write_bytes(clean[:at] + rng.randbytes(30) + clean[at + 30 :])
        monkeypatch.setattr(sys, "argv", ["prism-search", "status", "--storage", f"sqlite:///{db}"])
        with pytest.raises(SystemExit) as done:
            main()
        code, err = done.value.code, capsys.readouterr().err
        if code:
            assert_one_line(code, err, "")
            failed += 1
    assert failed  # some positions held what status reads


def test_the_dashboard_does_not_start_on_a_schema_it_cannot_decode(monkeypatch, capsys, tmp_path, good_db):
    """Damage in the schema itself fails at start-up, in one line, as for every reading command (content damage
    inside the trials is served as 503 pages instead: the test above)."""
    db = damaged_copy(good_db, tmp_path / "data", "table name not UTF-8")
    code, err = cli(monkeypatch, capsys, tmp_path, "dashboard", "--port", "0", "--storage", f"sqlite:///{db}")
    assert_one_line(code, err, DAMAGE["table name not UTF-8"][1])
