"""docs/own-model.md's Python snippets run as written: PrismLM in a loop of one's own, a family's `suggest` in a
plain Optuna objective, and the same space in Ray Tune through OptunaSearch."""

import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
SNIPPETS = re.findall(r"```python\n(.*?)```", (ROOT / "docs" / "own-model.md").read_text(), flags=re.S)


def _run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _snippet(marker: str) -> str:
    (code,) = [s for s in SNIPPETS if marker in s]
    return code


def test_prismlm_trains_in_a_loop_of_ones_own():
    out = _run(_snippet("PrismLM(cfg"))
    assert re.fullmatch(r"\d+ parameters, loss \d+\.\d{3}\n", out), out


def test_family_suggests_schedules_in_a_plain_optuna_objective():
    from prism import Schedule

    schedule = Schedule.parse(_run(_snippet("study.optimize")).strip().splitlines()[-1])
    assert schedule.n_layer == 6 and schedule.is_monotone and set(schedule.heads) <= {1, 2, 4, 8}


@pytest.mark.e2e
def test_the_same_space_runs_in_ray_tune_through_optuna_search():
    pytest.importorskip("ray.tune")
    from prism import Schedule

    schedule = Schedule.parse(_run(_snippet("OptunaSearch")).strip().splitlines()[-1])
    assert schedule.n_layer == 6 and schedule.is_monotone and set(schedule.heads) <= {1, 2, 4, 8}
