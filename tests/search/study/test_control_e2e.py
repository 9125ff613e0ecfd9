"""The positive control, smaller: studies/control.toml's task and model with the product's default strategy (TPE,
pruning, two confirmation rounds) finds the head count that the task needs and calls it better on seeds it was not
selected on. Sized for CI: the uniform family over 1, 2, 4 and 8 heads (all four trained at the search seed), 400
steps a run, 2 contenders in round 1, the default 4 seeds in round 2: 15 runs. At 400 steps `8x2` beat the baseline
`1x2` on 8 of 8 seeds by 0.18 to 0.97 nats, `4x2` on 7 of 8 (`python scripts/control_regime.py --steps 400
--schedules 1,1 2,2 4,4 8,8 --seeds 0 1 2 3 4 1000 1001 1002 --out /tmp/c400`, 4.1 min)."""

import subprocess
import sys
from pathlib import Path

import pytest

from search.study import Study
from search.text import verdict_text

pytestmark = [pytest.mark.e2e, pytest.mark.long]

ROOT = Path(__file__).resolve().parents[3]


def _smaller(tmp_path: Path) -> Path:
    text = (ROOT / "studies" / "control.toml").read_text()
    for old, new in (
        ("n_trials = 10", 'n_trials = 4\nkeep_checkpoints = "none"'),
        ('storage = "sqlite:///prism_control.db"', f'storage = "sqlite:///{tmp_path / "control.db"}"'),
        ("steps = 800", "steps = 400"),
        ("[model]", '[space]\nfamily = "uniform"\n\n[model]'),
        ("[resources]", "[search]\nconfirm_top = 2\n\n[resources]"),
    ):
        assert old in text, old
        text = text.replace(old, new)
    path = tmp_path / "control.toml"
    path.write_text(text)
    return path


def test_the_control_study_finds_the_head_count_the_task_needs_and_calls_it_better(tmp_path):
    path = _smaller(tmp_path)
    url = f"sqlite:///{tmp_path / 'control.db'}"
    # from Python, as a notebook runs it, in a process of its own (this worker may hold the session's Ray): the
    # local Ray the run starts stops when it returns, so the notebook's next study starts its own
    code = f"import ray\nfrom search import Study\nStudy.create({str(path)!r}).run()\nprint('ray left running:', ray.is_initialized())"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 0 and run.stdout.splitlines()[-1] == "ray left running: False", run.stdout + run.stderr[-3000:]

    study = Study.load("control", storage=url)
    verdict = study.verdict()
    assert verdict.kind == "better", verdict_text(verdict, "control")
    assert str(study.config.baseline) == "1x2"  # the default baseline at d_model 32: one head of dim 32
    assert verdict.schedule in ("8x2", "4x2") and verdict.effect < -0.3, verdict_text(verdict, "control")
    assert min(verdict.seeds) >= 1000  # judged on the confirmation's seeds, never the search seed it was picked on

    status = subprocess.run(
        [sys.executable, "-m", "search.cli", "status", "control", "--storage", url], capture_output=True, text=True, cwd=ROOT
    )
    assert status.returncode == 0 and status.stdout.startswith(f"control: better: {verdict.schedule}"), status.stdout
