"""[trainer] validation: each mistake is one line naming the field and the fix, before anything runs."""

import pytest

from search.config import load_config
from search.errors import ConfigError
from tests.search.trainers.conftest import EXAMPLE


def test_default_is_prisms_own_trainer():
    assert load_config(EXAMPLE.parents[1] / "studies" / "tiny.toml").trainer.kind == "prism"


@pytest.mark.parametrize(
    "trainer, fragment",
    [
        (
            {"argv": ["{python}", "t.py", "--heads", "{heads}", "--lr", "{lr}"]},
            "trainer.argv: unknown placeholder {lr}; use {schedule}",
        ),
        ({"argv": ["{python}", "t.py", "--seed", "{seed}"]}, "the command is never told the schedule; pass {heads}"),
        ({"argv": ["no-such-trainer-here", "{heads}"]}, "argv[0] 'no-such-trainer-here': no such executable"),
        ({"argv": ["./missing.sh", "{heads}"]}, "argv[0] './missing.sh': no such executable"),
        ({"cwd": "/no/such/folder"}, "trainer.cwd: '/no/such/folder' is not a folder"),
        ({"time_limit_s": "60"}, 'trainer.time_limit_s: "60" is a string where a number is expected'),
        ({"kind": "lightning"}, "trainer: kind must be 'prism', 'command' or 'python'"),
        ({"kind": "python", "function": "no_such_module:run"}, "no module 'no_such_module' on sys.path"),
        ({"kind": "python", "function": "train_gpt:nope", "path": [str(EXAMPLE)]}, "train_gpt.py defines no 'nope'"),
        ({"schedules": "uniform"}, "trainer: schedules='uniform' cannot build the 'ramp' family's schedules"),
    ],
)
def test_bad_trainer_sections_are_refused_in_one_line(tmp_path, trainer, fragment):
    text = (EXAMPLE / "study.toml").read_text()
    head, _, _ = text.partition("[trainer]")
    argv = trainer.pop("argv", None)
    lines = [f"{k} = {_toml(v)}" for k, v in trainer.items()]
    if trainer.get("kind") != "python":
        lines += ["kind = 'command'"] * ("kind" not in trainer) + [f"argv = {_toml(argv or ['{python}', 't.py', '{heads}'])}"]
    path = tmp_path / "study.toml"
    path.write_text(head + "[trainer]\n" + "\n".join(lines) + "\n")
    with pytest.raises(ConfigError) as e:
        load_config(path)
    assert fragment in str(e.value) and "\n" not in str(e.value), str(e.value)


def _toml(v) -> str:
    import json

    return json.dumps(v)


def test_python_trainer_module_is_found_without_importing_it(tmp_path):
    """Validation reads the module's source: neither it nor torch is imported, and sys.path is left as it was."""
    import subprocess
    import sys

    text = (EXAMPLE / "study.toml").read_text().partition("[trainer]")[0]
    (tmp_path / "study.toml").write_text(text + f'[trainer]\nkind = "python"\nfunction = "train_gpt:run"\npath = ["{EXAMPLE}"]\n')
    code = (
        "import sys; from search.config import load_config\n"
        f"before = list(sys.path); config = load_config({str(tmp_path / 'study.toml')!r})\n"
        "print(config.trainer.function, sorted(m for m in ('train_gpt', 'torch') if m in sys.modules), sys.path == before)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["train_gpt:run", "[]", "True"], done.stdout + done.stderr


def test_a_python_trainer_whose_module_fails_on_import_is_refused_before_anything_is_stored(tmp_path, monkeypatch, capsys):
    """A module found on the path but failing when imported (a dependency missing on this machine) passed the section
    check, then failed every trial on the workers: it is imported in a child process first, one line, exit 2."""
    import sys

    from search.cli import main

    (tmp_path / "needs_more.py").write_text("import a_package_nobody_installed\n\ndef run(request, reporter):\n    pass\n")
    text = (EXAMPLE / "study.toml").read_text().partition("[trainer]")[0]
    toml = tmp_path / "study.toml"
    toml.write_text(text + f'[trainer]\nkind = "python"\nfunction = "needs_more:run"\npath = ["{tmp_path}"]\n')
    monkeypatch.chdir(tmp_path)
    import search.runner.cluster

    monkeypatch.setattr(search.runner.cluster, "connect_ray", lambda *a, **k: pytest.fail("Ray was started"))
    monkeypatch.setattr(sys, "argv", ["prism-search", "run", str(toml), "--storage", f"sqlite:///{tmp_path / 'own.db'}"])
    with pytest.raises(SystemExit) as exit_info:
        main()
    err = capsys.readouterr().err.strip()
    assert exit_info.value.code == 2 and len(err.splitlines()) == 1, err
    assert "importing 'needs_more' failed: ModuleNotFoundError: No module named 'a_package_nobody_installed'" in err
    assert "fix: install what it imports" in err and not (tmp_path / "own.db").exists()


def test_train_fields_an_own_trainer_never_receives_are_not_checked_against_it(tmp_path):
    """`warmup_steps` is prism's own loop's: an own trainer gets steps, eval_every and batch_size only, so a warmup
    as long as its steps is no mistake of its config. Prism's own loop still refuses it."""
    text = (EXAMPLE / "study.toml").read_text()
    steps = int(text.partition("steps = ")[2].split()[0])
    head, _, trainer = text.partition("[trainer]")
    head = head.replace("warmup_steps = 0\n", f"warmup_steps = {steps}\n", 1)
    (tmp_path / "own.toml").write_text(head + "[trainer]" + trainer)
    assert load_config(tmp_path / "own.toml").train.warmup_steps == steps
    (tmp_path / "prism.toml").write_text(head)
    with pytest.raises(ConfigError, match=f"train.warmup_steps={steps} must be below steps={steps}"):
        load_config(tmp_path / "prism.toml")
