"""Adversarial input and environment (issue 25 items 6-10, 12-16): odd URLs, names, markup, environment values,
TOML files and databases through the real CLI. Each case is a one-line error (exit 2) that writes nothing, or the
correct behaviour.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from search.cli import main
from tests.search.conftest import ROOT

TINY = (ROOT / "studies" / "tiny.toml").read_text()


def cli(monkeypatch, capsys, folder: Path, *args: str) -> tuple[int, str, str]:
    """`prism-search ARGS` in `folder`, in this process: (exit code, stdout, stderr)."""
    monkeypatch.chdir(folder)
    monkeypatch.setattr(sys, "argv", ["prism-search", *args])
    with pytest.raises(SystemExit) as done:
        main()
    out, err = capsys.readouterr()
    return done.value.code, out, err


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() if p.is_file() else b"<dir>" for p in sorted(folder.rglob("*"))}


def refused(monkeypatch, capsys, folder: Path, args: tuple[str, ...], *names: str) -> str:
    """Run a command that must fail with one line naming every one of `names`, exit 2, writing nothing."""
    before = snapshot(folder)
    code, out, err = cli(monkeypatch, capsys, folder, *args)
    assert code == 2, (out, err)
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    for name in names:
        assert name in err, (name, err)
    assert snapshot(folder) == before, "a refused command wrote or changed a file"
    return err


def tiny(folder: Path, *edit: tuple[str, str], name: str = "T.toml") -> Path:
    text = TINY
    for old, new in edit:
        assert old in text, old
        text = text.replace(old, new)
    path = folder / name
    path.write_text(text)
    return path


# --- item 9: a study name is one safe path component ----------------------------------------------------------------
@pytest.mark.parametrize("name", [".", "..", ".hidden", "-rf", "a/b"])
def test_a_study_name_that_is_not_a_plain_path_component_is_refused(name, tmp_path, monkeypatch, capsys):
    tiny(tmp_path, ('name = "tiny"', f'name = "{name}"'))
    refused(monkeypatch, capsys, tmp_path, ("run", "T.toml"), "T.toml: name:", "fix")


# --- item 12: numbers, environment values and TOML files ------------------------------------------------------------
@pytest.mark.parametrize(
    "args, names",
    [
        (("train", "1x3", "--config", "T.toml", "--seed", "18446744073709551616"), ("seed",)),
        (("train", "1x3", "--config", "T.toml", "--threads", "100000000000"), ("cpus_per_trial",)),
    ],
    ids=["seed-2^64", "threads-1e11"],
)
def test_train_numbers_beyond_what_torch_takes_are_one_line(args, names, tmp_path, monkeypatch, capsys):
    tiny(tmp_path)
    refused(monkeypatch, capsys, tmp_path, args, *names)


@pytest.mark.parametrize("variable, value", [("PRISM_SEARCH_HEARTBEAT_S", "abc"), ("PRISM_SEARCH_GRACE_S", "-5")])
def test_a_bad_heartbeat_setting_is_one_line_naming_the_variable(variable, value, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(variable, value)
    code, out, _ = cli(monkeypatch, capsys, tmp_path, "--help")
    assert code == 0 and "Usage" in out  # --help reads no storage: the setting does not matter to it
    tiny(tmp_path)
    refused(monkeypatch, capsys, tmp_path, ("run", "T.toml"), variable, repr(value))
    refused(monkeypatch, capsys, tmp_path, ("status", "--storage", f"sqlite:///{tmp_path / 'T.toml'}"), variable)


def test_deeply_nested_toml_is_one_line(tmp_path, monkeypatch, capsys):
    (tmp_path / "deep.toml").write_text("x = " + "[" * 100_000 + "]" * 100_000 + "\n")
    refused(monkeypatch, capsys, tmp_path, ("run", "deep.toml"), "deep.toml", "nested")


def test_a_utf8_byte_order_mark_is_accepted(tmp_path, monkeypatch, capsys):
    path = tiny(tmp_path)
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    code, out, err = cli(monkeypatch, capsys, tmp_path, "schedules", "T.toml")
    assert code == 0 and "ramp:" in out, err
