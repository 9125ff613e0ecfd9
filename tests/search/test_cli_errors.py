"""Every command-line usage error, for every command and option the typer app declares, is one line and exit 2.

The cases are generated from the app's own declarations, so a command or option added later is covered too.
"""

import subprocess
import sys

import pytest
import typer.main
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.core import TyperArgument, TyperOption

from search.cli import app, main
from tests.search.conftest import ROOT

COMMANDS = typer.main.get_command(app).commands  # type: ignore[attr-defined]
NUMERIC = [(name, p) for name, cmd in COMMANDS.items() for p in cmd.params if p.type_descriptor.annotation in (int, float)]


def required_args(command: str) -> list[str]:
    """Placeholders for a command's required arguments: parsing fails on the option before any is read."""
    return ["x" for p in COMMANDS[command].params if isinstance(p, TyperArgument) and p.required]


def run_cli(monkeypatch, capsys, tmp_path, *args: str) -> tuple[int, str, str]:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["prism-search", *args])
    with pytest.raises(SystemExit) as done:
        main()
    out = capsys.readouterr()
    return done.value.code, out.out, out.err


def assert_one_line(code: int, out: str, err: str, *fragments: str) -> None:
    assert code == 2, (out, err)
    assert out == "" and err.startswith("error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err and "(fix: see `prism-search" in err, err
    for fragment in fragments:
        assert fragment in err, (fragment, err)


def bad_values(option: TyperOption) -> list[str]:
    values = ["abc", "", "1e", "--"] + (["1.5"] if option.type_descriptor.annotation is int else [])
    if option.min is not None:
        values += [str(option.min - 1), str(option.min - 1000)]
    if option.max is not None:
        values += [str(option.max + 1)]
    return values


def test_every_numeric_option_declares_its_bounds():
    assert len(NUMERIC) >= 10 and {"run", "resume", "confirm", "train", "dashboard", "prior"} <= {n for n, _ in NUMERIC}
    assert [f"{name} {p.opts[0]}" for name, p in NUMERIC if p.min is None] == []


@pytest.mark.parametrize("command, option", NUMERIC, ids=[f"{n}{p.opts[0]}" for n, p in NUMERIC])
def test_a_bad_value_of_any_numeric_option_is_one_line_and_exit_2(monkeypatch, capsys, tmp_path, command, option):
    for value in bad_values(option):
        code, out, err = run_cli(monkeypatch, capsys, tmp_path, command, *required_args(command), option.opts[0], value)
        assert_one_line(code, out, err, option.opts[0], f"prism-search {command} --help")
    assert list(tmp_path.iterdir()) == []  # nothing written, no database created


def not_a_number(value: str) -> bool:
    try:
        float(value)
    except ValueError:
        return True
    return False


@pytest.mark.e2e
@given(value=st.text(max_size=12).filter(not_a_number))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_any_non_number_for_a_number_is_one_line(monkeypatch, capsys, tmp_path, value):
    for command, option in NUMERIC:
        code, out, err = run_cli(monkeypatch, capsys, tmp_path, command, *required_args(command), f"{option.opts[0]}={value}")
        assert_one_line(code, out, err, option.opts[0])


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_an_unknown_option_or_a_missing_argument_is_one_line_and_exit_2(monkeypatch, capsys, tmp_path, command):
    code, out, err = run_cli(monkeypatch, capsys, tmp_path, command, *required_args(command), "--no-such-option")
    assert_one_line(code, out, err, "No such option: --no-such-option", f"prism-search {command} --help")
    if required_args(command):
        code, out, err = run_cli(monkeypatch, capsys, tmp_path, command)
        assert_one_line(code, out, err, "Missing argument")
    assert list(tmp_path.iterdir()) == []


def test_an_unknown_command_is_one_line_and_no_arguments_is_the_help(monkeypatch, capsys, tmp_path):
    assert_one_line(*run_cli(monkeypatch, capsys, tmp_path, "no-such-command"), "No such command 'no-such-command'")
    code, out, err = run_cli(monkeypatch, capsys, tmp_path)
    assert code == 0 and "Usage: prism-search" in out and err == ""


@pytest.mark.parametrize(
    "args",
    [
        ["run", "studies/quickstart.toml", "--n-trials", "0"],
        ["run", "studies/quickstart.toml", "--workers", "0"],
        ["confirm", "NAME", "--top", "0"],
        ["train", "uniform", "--steps", "0"],
        ["dashboard", "--port", "99999"],
    ],
)
def test_the_reported_usage_errors_as_a_user_runs_them(args, tmp_path):
    """The CLI in its own process, as a user runs it: no traceback reaches the terminal."""
    args = [str(ROOT / a) if a.endswith(".toml") else a for a in args]
    result = subprocess.run([sys.executable, "-m", "search.cli", *args], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert_one_line(result.returncode, result.stdout, result.stderr, args[-2])
    assert list(tmp_path.iterdir()) == []
