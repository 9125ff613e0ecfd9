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


def test_the_python_trainer_written_from_the_docs_trains_and_reports(tmp_path):
    """The page's complete function trainer, saved as its text says and run by the worker's python session as a
    study's trial is: evaluations in step with the caller, then a finished result that passed the neutrality probe."""
    from search.config import load_config, parse_config
    from search.runner.messages import Evaluated, Finished
    from search.runner.outside import PythonSession
    from search.runner.worker import TrialSpec

    (tmp_path / "my_trainer.py").write_text(_snippet("def train(request, reporter)"))
    data = load_config(ROOT / "studies" / "tiny.toml").model_dump()
    data["trainer"] = {"kind": "python", "function": "my_trainer:train", "path": [str(tmp_path)]}
    data["train"] |= {"steps": 20, "eval_every": 10, "warmup_steps": 2}
    config = parse_config(data, "test")
    spec = TrialSpec.of(
        config, "1x1,2x1,4x1", fingerprint="", number=0, seed=0, device="cpu", checkpoint_dir=None, keep_checkpoints="none", probe=True
    )
    session = PythonSession()
    session.start(spec)
    points = []
    while isinstance(out := session.advance(), Evaluated):
        points.append(out.point)
    assert isinstance(out, Finished) and [p.step for p in points] == [10, 20]
    assert out.result.final_val_loss == points[-1].val_loss < 5.5  # learned: below a uniform guess over 256 bytes (ln 256 = 5.55)
    assert out.result.n_params > 0 and out.result.extra["throughput_ratio"] > 0


def test_every_export_format_loads_into_a_model_of_its_schedule_as_the_page_says(tmp_path):
    """Each format's recipe, run on the file `export --schedule` writes for a stored study: the model it builds has
    the exported schedule's head count in every layer."""
    import json
    import os

    from prism import Schedule
    from search.config import load_config
    from search.study.export import render_schedule
    from tests.search.synthetic import synthetic_study

    tiny_config = load_config(ROOT / "studies" / "tiny.toml").model_copy(update={"storage": f"sqlite:///{tmp_path / 's.db'}"})
    study = synthetic_study(tiny_config, tiny_config.storage, 12)
    files = {"json": "schedule.json", "nanogpt": "nanogpt.json", "hf": "hf.json"}
    for fmt, name in files.items():
        (tmp_path / name).write_text(render_schedule(study, tiny_config, "best", fmt))
    heads = list(Schedule.parse(json.loads((tmp_path / "schedule.json").read_text())["schedule"]).heads)
    env = os.environ | {"PYTHONPATH": os.pathsep.join([str(ROOT / "examples" / "own_trainer"), str(ROOT)])}
    for fmt, name in files.items():
        code = _snippet(f'open("{name}")')
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == f"{fmt} {heads}"
