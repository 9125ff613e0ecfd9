"""Every command README.md shows runs as shown, in order, after command 1 (the quickstart).

The commands run in a fresh folder holding a shortened copy of studies/quickstart.toml at the same relative path
(same name, same model, fewer and smaller steps, fewer trials), so they run word for word: the study's SQLite file and checkpoints
land in that folder. The only rewrite is the dashboards' port (a free one instead of the default 8080, which another
process may hold). The lines the test cannot run are listed in NOT_RUN with the reason; any other line of a ```bash
block that is not a `prism-search` command fails the test, so a new README command is never skipped silently.
"""

import json
import os
import re
import shlex
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from search.study.single import TrainOverrides, resolve

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()

INSTALL = "installs into a fresh venv; the test runs inside the installed one"
NOT_RUN = {
    "python3 -m venv .venv": INSTALL,
    ".venv/bin/pip install -e .": INSTALL,
    "bash scripts/test.sh": "README command 2 is CI itself (.ci/run: lint, format, types and this very suite)",
}
SERVERS = {"dashboard"}  # they serve until stopped: the test waits until they answer, then stops them

# the quickstart shortened: 20 steps of 4 sequences instead of 600 of 16 (warmup and evaluations scaled down),
# 5 trials instead of 10, 2 throughput-probe steps instead of 8
SHORTEN = [
    ("n_trials = 10", "n_trials = 5"),
    ("steps = 600", "steps = 20"),
    ("batch_size = 16", "batch_size = 4"),
    ("warmup_steps = 60", "warmup_steps = 2"),
    ("eval_every = 100", "eval_every = 10"),
    ("eval_batches = 8", "eval_batches = 2"),
    ("baseline_seeds = 2", "baseline_seeds = 2\nthroughput_probe_steps = 2"),
]


def readme_commands() -> list[list[str]]:
    """The argument lists after `prism-search` of every README ```bash line, in order; other commands must be NOT_RUN."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", README, re.S):
        for line in block.splitlines():
            words = shlex.split(line, comments=True)
            while words:
                segment, words = (words[: words.index("&&")], words[words.index("&&") + 1 :]) if "&&" in words else (words, [])
                if segment[0] in ("prism-search", ".venv/bin/prism-search"):
                    commands.append(segment[1:])
                else:
                    assert " ".join(segment) in NOT_RUN, f"README command {' '.join(segment)!r} is neither run here nor in NOT_RUN"
    return commands


def test_readme_commands_are_parsed_and_every_skip_is_still_in_the_readme():
    commands = readme_commands()
    assert commands[0] == ["run", "studies/quickstart.toml"]  # command 1: the quickstart, which the rest follow
    assert len(commands) >= 15 and {c[0] for c in commands} >= {"status", "train", "confirm", "audit", "prior", "dashboard"}
    segments = [s for block in re.findall(r"```bash\n(.*?)```", README, re.S) for s in re.split(r"&&|\n", block)]
    skipped = {" ".join(shlex.split(s, comments=True)) for s in segments}
    assert set(NOT_RUN) <= skipped, set(NOT_RUN) - skipped  # no stale entry


def test_ci_runs_exactly_readme_command_2():
    command_2 = next(line for line in README.splitlines() if line.strip().startswith("bash scripts/"))
    assert (ROOT / ".ci" / "run").read_text().splitlines()[-1] == command_2.strip() == "bash scripts/test.sh"


def python_examples() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README, re.S)


def test_the_python_quickstart_compiles_and_uses_the_public_api():
    """Run for real after the CLI's commands (test_every_readme_command_runs_as_shown_after_the_quickstart)."""
    import search

    (example,) = python_examples()
    compile(example, "README.md", "exec")
    imported = re.findall(r"^from search import (.+)$", example, re.M)
    assert imported and all(name.strip() in search.__all__ for line in imported for name in line.split(","))


def test_train_examples_in_the_docs_text_fit_their_model():
    """`prism-search train SCHEDULE` in the prose of the README and docs/ (not run: minutes on CPU) fits the built-in
    defaults or the named config."""
    texts = [README, *(path.read_text() for path in sorted((ROOT / "docs").glob("*.md")))]
    examples = [example for text in texts for example in re.findall(r"`prism-search train ([^`]*)`", text)]
    assert examples
    for example in examples:
        words = shlex.split(example)
        config = str(ROOT / words[words.index("--config") + 1]) if "--config" in words else None
        resolve(config, words[0], TrainOverrides())  # raises ConfigError when the schedule does not fit


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve(argv: list[str], cwd: Path, env: dict) -> str:
    """Start a dashboard on a free port, return its first page once it answers, stop it."""
    port = _free_port()
    proc = subprocess.Popen([*argv, "--port", str(port)], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert proc.poll() is None, proc.communicate()[0]
            try:
                return urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10).read().decode()
            except OSError:
                time.sleep(0.5)
        raise TimeoutError(f"{argv} did not answer on port {port}")
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.mark.long
@pytest.mark.e2e
def test_every_readme_command_runs_as_shown_after_the_quickstart(tmp_path):
    text = (ROOT / "studies" / "quickstart.toml").read_text()
    for old, new in SHORTEN:
        assert re.search(rf"^{old}$", text, re.M), old
        text = re.sub(rf"^{old}$", new, text, flags=re.M)
    (tmp_path / "studies").mkdir()
    (tmp_path / "studies" / "quickstart.toml").write_text(text)
    env = os.environ | {"PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    outputs: dict[str, str] = {}
    for args in readme_commands():
        argv = [sys.executable, "-m", "search.cli", *args]
        if args[0] in SERVERS:
            page = _serve(argv, tmp_path, env)
            assert ("Optuna Dashboard" if "--optuna" in args else "quickstart") in page, page[:500]
            continue
        proc = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, f"prism-search {' '.join(args)}: exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        outputs.setdefault(args[0], proc.stdout)
        outputs[" ".join(args)] = proc.stdout
    assert "prism-search confirm quickstart" in outputs["run"]  # the end of the quickstart names the next command
    assert "gap to uniform" in outputs["status"] and "1x2,2x1,4x1" in outputs["train"]
    assert outputs["export"].startswith("number,") and "confirmation of quickstart" in outputs["confirm"]
    assert "variant: " in outputs["prior"] and "distance: " in outputs["prior"]  # the columns are explained
    for written in ("model/model.safetensors", "report.html", "profile.json", "prior.json"):
        assert (tmp_path / written).is_file(), written
    (example,) = python_examples()  # the Python quickstart, on the study the commands above trained and confirmed
    proc = subprocess.run([sys.executable, "-c", example], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    verdict, best, rows, optuna_line = proc.stdout.splitlines()
    assert verdict == json.loads(outputs["status quickstart --json"])["verdict"]["text"]
    assert best.startswith("best: ") and " finished trials" in best
    assert rows.startswith("[('") and optuna_line.split()[0].isdigit() and "plain Optuna study" in optuna_line
