"""The example study end to end on local Ray with two workers: the user's trainer run as a command, one trial
pruned (its process gone), one failing (its stderr tail in `status`), the driver interrupted and resumed with
nothing lost, a verdict at the end; and the same trainer through the python kind."""

import json
import signal
import subprocess
import sys
import textwrap

import optuna
import pytest
from optuna.trial import TrialState

from search.analysis.budget import budget
from search.config import load_config
from search.runner.driver import Driver
from search.runner.preflight import check_corpus
from search.storage import open_storage
from search.study.create import open_study
from search.study.pruning import make_stopping
from tests.search.trainers.conftest import EXAMPLE, ROOT, alive

pytestmark = pytest.mark.e2e

FAILING, STALLED = "1x2,2x1", "1x2,4x1"  # grid indices 1 and 2 of the ramp space: the walk reaches both early
# the wrapper a user's flaky trainer stands for: one schedule crashes, one learns nothing (lr 1e-9) and is pruned;
# that one trains ten times the steps (its later --steps wins), so the driver's stop, decided at one of the study's
# evaluations, reaches its process mid-run however loaded the machine (at load 11 the 30-step run once ended first)
WRAPPER = f"""
import os, sys
schedule, argv = sys.argv[1], sys.argv[2:]
if schedule == {FAILING!r}:
    print("loading data", file=sys.stderr)
    sys.exit("RuntimeError: CUDA out of memory (simulated by the test's wrapper)")
if schedule == {STALLED!r}:
    argv += ["--lr", "1e-9", "--steps", "300"]
os.execv(sys.executable, [sys.executable, {str(EXAMPLE / "train_gpt.py")!r}, *argv])
"""


RUN = dict(capture_output=True, text=True, cwd=ROOT)


def _cli(*args):
    return subprocess.Popen(
        [sys.executable, "-m", "search.cli", *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT
    )


def _study_toml(tmp_path) -> str:
    (tmp_path / "wrapper.py").write_text(textwrap.dedent(WRAPPER))
    text = (EXAMPLE / "study.toml").read_text()
    text = text.replace("n_trials = 8", "n_trials = 6").replace('sampler = "tpe"', 'sampler = "grid"\nconfirmation = "manual"')
    text = text.replace('"{python}", "examples/own_trainer/train_gpt.py",', f'"{{python}}", "{tmp_path / "wrapper.py"}", "{{schedule}}",')
    text = text.replace('keep_checkpoints = "none"', f'keep_checkpoints = "none"\ncheckpoint_dir = "{tmp_path / "runs"}"')
    path = tmp_path / "study.toml"
    path.write_text(text)
    return str(path)


def _trainer_pids(study) -> list[int]:
    return [t.user_attrs["worker"]["trainer_pid"] for t in study.trials if "trainer_pid" in t.user_attrs.get("worker", {})]


@pytest.mark.long
def test_command_study_prunes_fails_is_interrupted_resumes_and_ends_with_a_verdict(tmp_path):
    url = f"sqlite:///{tmp_path / 'own.db'}"
    proc = _cli("run", _study_toml(tmp_path), "--storage", url)
    lines = []
    for line in proc.stdout:  # interrupt once the failing trial has failed and two have finished: others are training
        lines.append(line)
        if any("FAIL" in l and "exited with code" in l for l in lines) and sum("COMPLETE" in l or "PRUNED" in l for l in lines) >= 2:
            proc.send_signal(signal.SIGINT)
            break
    out = "".join(lines) + proc.communicate(timeout=120)[0]
    assert proc.returncode == 130, out
    study = optuna.load_study(study_name="own-trainer", storage=url)
    before = {t.number: t.values for t in study.trials if t.state == TrialState.COMPLETE}
    interrupted = [t for t in study.trials if t.state == TrialState.FAIL and "interrupted" in t.user_attrs.get("error", "")]
    assert len(before) >= 2 and interrupted, out
    assert not any(alive(pid) for pid in _trainer_pids(study)), "a trainer outlived the interrupted driver"

    proc = _cli("resume", "own-trainer", "--storage", url)
    out = proc.communicate(timeout=300)[0]
    assert proc.returncode == 0, out
    study = optuna.load_study(study_name="own-trainer", storage=url)
    trials = [(t.number, t.state.name, t.user_attrs.get("schedule"), t.user_attrs.get("error")) for t in study.trials]
    assert {t.number: t.values for t in study.trials if t.number in before} == before, trials  # nothing lost
    assert budget(study.get_trials(), search_seed=0).trained == 6
    assert not study.get_trials(states=(TrialState.RUNNING, TrialState.WAITING))
    assert not any(alive(pid) for pid in _trainer_pids(study))

    pruned = [t for t in study.trials if t.state == TrialState.PRUNED and t.user_attrs["schedule"] == STALLED]  # others may be too
    assert len(pruned) == 1, trials
    assert not alive(pruned[0].user_attrs["worker"]["trainer_pid"])
    folder = tmp_path / "runs" / f"own-trainer-{study.user_attrs['prism.study_uid']}"  # the study's own folder: NAME-UID
    report = (folder / f"trial-{pruned[0].number:05d}" / "report.jsonl").read_text().splitlines()
    assert json.loads(report[-1])["event"] == "eval"  # stopped before its end: the process was ended, then gone
    failed = [t for t in study.trials if t.state == TrialState.FAIL and t.user_attrs.get("schedule") == FAILING]
    assert (
        len(failed) == 1 and "exited with code 1; stderr: loading data | RuntimeError: CUDA out of memory" in failed[0].user_attrs["error"]
    ), (
        trials,
        out,
    )
    complete = [t for t in study.trials if t.state == TrialState.COMPLETE]
    assert all(t.user_attrs["n_params"] == complete[0].user_attrs["n_params"] and t.user_attrs["throughput_ratio"] > 0 for t in complete)

    status = subprocess.run([sys.executable, "-m", "search.cli", "status", "own-trainer", "--storage", url], **RUN)
    assert status.returncode == 0 and status.stdout.startswith("own-trainer: "), status.stdout + status.stderr  # the verdict first
    assert "gap to uniform" in status.stdout and "failed trial" in status.stdout, status.stdout
    as_json = subprocess.run([sys.executable, "-m", "search.cli", "status", "own-trainer", "--storage", url, "--json"], **RUN)
    (shown,) = json.loads(as_json.stdout)["failed_trials"]  # a named study: its one object
    assert (shown["number"], shown["schedule"], shown["seed"]) == (failed[0].number, FAILING, 0)
    assert shown["error"].startswith("TrainerError") and "CUDA out of memory (simulated by the test's wrapper)" in shown["error"]


def test_python_kind_runs_the_example_function_on_two_workers(ray_local, tmp_path):
    text = (EXAMPLE / "study.toml").read_text().partition("[trainer]")[0].replace("n_trials = 8", "n_trials = 3")
    text += f'[trainer]\nkind = "python"\nfunction = "train_gpt:run"\npath = ["{EXAMPLE}"]\n'
    text = text.replace('keep_checkpoints = "none"', f'keep_checkpoints = "none"\ncheckpoint_dir = "{tmp_path / "runs"}"')
    (tmp_path / "study.toml").write_text(text)
    config = load_config(tmp_path / "study.toml").model_copy(update={"storage": f"sqlite:///{tmp_path / 'py.db'}"})
    ctx = open_study(config, open_storage(config.storage), check_corpus(config))
    Driver(ctx, stopping=make_stopping(ctx)).run(config.n_trials, n_workers=2)
    trials = ctx.study.get_trials()
    assert budget(trials, search_seed=0).trained == 3 and not [t for t in trials if t.state == TrialState.FAIL]
    assert {t.user_attrs["worker"]["kernels"] for t in trials if "worker" in t.user_attrs} == {"trainer python"}
    assert all(len(t.user_attrs["curve"]) == 3 and t.user_attrs["tokens_per_s"] > 0 for t in trials if t.state == TrialState.COMPLETE)
    _exports_load_into_the_example_trainer(ctx.study, config, tmp_path)


def _exports_load_into_the_example_trainer(study, config, tmp_path):
    """`export --schedule best --format json|hf|nanogpt`: each builds the example's GPT with the best trial's heads and
    exactly the parameter count that trial reported."""
    import importlib.util

    from search.study.export import render_schedule

    spec = importlib.util.spec_from_file_location("own_train_gpt", EXAMPLE / "train_gpt.py")
    train_gpt = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = train_gpt  # its dataclass resolves annotations through sys.modules
    spec.loader.exec_module(train_gpt)
    best = min((t for t in study.trials if t.state == TrialState.COMPLETE), key=lambda t: t.values[0])
    for fmt, heads_key, width_key in [
        ("json", "n_head", "d_model"),
        ("hf", "num_query_heads", "model_dim"),
        ("nanogpt", "n_head", "n_embd"),
    ]:
        data = json.loads(render_schedule(study, config, "best", fmt))
        path = tmp_path / f"best.{fmt}.json"
        path.write_text(json.dumps(data))
        if fmt == "nanogpt":  # the file the trainer's own --schedule-file reads
            heads = train_gpt.heads_from(train_gpt.parser().parse_args(["--schedule-file", str(path), "--data", "x"]))
        else:
            heads = tuple(data[heads_key])
        model = train_gpt.GPT(train_gpt.GPTConfig(block_size=32, n_layer=len(heads), n_head=heads, n_embd=data[width_key]))
        assert ",".join(map(str, heads)) == ",".join(str(best.user_attrs[f"heads_{i:02d}"]) for i in range(3))
        assert model.num_params() == best.user_attrs["n_params"], fmt
