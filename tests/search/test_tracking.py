"""Experiment trackers on real parts: the real driver on studies/tiny.toml, a real `mlflow server` and MLflow's
file store, TensorBoard event files read back with tensorboard's reader, W&B offline run files parsed back."""

import json
import logging
import os
import signal
import struct
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from search.analysis.budget import is_served
from search.config import TrackingSection
from search.errors import ConfigError
from search.outputs.urls import mask_url
from search.runner.driver import Driver
from search.runner.preflight import check_corpus
from search.storage import open_storage
from search.storage.records import FINISHED
from search.study.create import open_study
from search.study.pruning import make_stopping
from search.tracking import Tracker, make_trackers
from tests.search.conftest import ROOT
from tests.search.runner.test_cluster import _free_port


def test_track_flags_pick_defaults_targets_and_refuse_unknown_trackers():
    tracking = TrackingSection(tensorboard="/tb").with_flags(["mlflow", "wandb=wb"])
    assert tracking.mlflow == "sqlite:///mlflow.db" and tracking.tensorboard == "/tb"
    assert tracking.wandb == str(Path("wb").absolute())
    with pytest.raises(ConfigError, match=r"--track 'neptune': unknown tracker; use mlflow, tensorboard, wandb"):
        TrackingSection().with_flags(["neptune"])
    with pytest.raises(ConfigError, match=r"--track 'mlfow=http://prism:\*\*\*@db:5000': unknown tracker") as refused:
        TrackingSection().with_flags(["mlfow=http://prism:s3cret@db:5000"])  # a misspelt name, its URI's password
    assert "s3cret" not in str(refused.value)


@pytest.mark.parametrize("tracker", ["mlflow", "tensorboard", "wandb"])
def test_a_missing_tracker_library_is_one_line_before_anything(tmp_path, tracker):
    db = tmp_path / "never.db"
    # sys.modules[name] = None is how Python marks a module as not importable: find_spec sees it missing
    code = (
        f"import sys; sys.modules[{tracker!r}] = None; from search.cli import main; "
        f"sys.argv[1:] = ['run', 'studies/tiny.toml', '--storage', 'sqlite:///{db}', '--track', {tracker!r}]; main()"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert result.returncode == 2 and result.stdout == "", result.stderr
    assert result.stderr == f"error: tracking.{tracker} needs {tracker}: pip install 'prism-search[{tracker}]'\n"
    assert not db.exists()  # refused before the storage was opened


def test_a_failing_tracker_warns_with_its_uri_and_error_masked(caplog):
    """The warning names the tracker's URI and the client's error, both of which may hold a password."""
    uri = f"http://prism:s3cret@127.0.0.1:{_free_port()}"

    class Leaky(Tracker):  # a client whose error quotes the URI it was given, as HTTP clients do
        name = "mlflow"

        def log_trial(self, study_name, record):
            raise ConnectionError(f"cannot reach {self.target}/api/2.0/mlflow")

    trial = optuna.trial.create_trial(value=1.0, user_attrs={"schedule": "2x2", "heads_00": 2, "heads_01": 2})
    with caplog.at_level(logging.WARNING, logger="search.tracking"):
        Leaky(uri)(optuna.create_study(study_name="s"), trial)
    (warning,) = [r.getMessage() for r in caplog.records if r.name == "search.tracking"]
    assert "s3cret" not in warning and warning.count(mask_url(uri)) == 2, warning


def _run(config, n_trials: int, **tracking):
    config = config.model_copy(update={"n_trials": n_trials, "tracking": TrackingSection(**tracking)})
    fingerprint = check_corpus(config)
    ctx = open_study(config, open_storage(config.storage), fingerprint, make_trackers(config.tracking))
    study = ctx.study
    Driver(ctx, stopping=make_stopping(ctx)).run(n_trials, n_workers=2)
    finished = study.get_trials(states=FINISHED)
    assert sum(not is_served(t) for t in finished) == n_trials  # served duplicates are tracked too, on top
    return finished


def _check_mlflow(uri: str, finished) -> None:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("tiny")
    runs = client.search_runs([exp.experiment_id])
    parent = [r for r in runs if r.data.tags.get("prism_kind") == "study"]
    children = {int(r.data.params["trial"]): r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent[0].info.run_id}
    assert len(parent) == 1 and sorted(children) == sorted(t.number for t in finished)
    for t in finished:
        run = children[t.number]
        assert run.data.params["schedule"] == t.user_attrs["schedule"] and run.data.params["role"] == t.user_attrs["role"]
        assert run.data.params["heads_00"] == str(t.user_attrs["heads_00"]) and run.data.tags["state"] == t.state.name
        curve = [(m.step, m.value) for m in client.get_metric_history(run.info.run_id, "val_loss")]
        assert sorted(curve) == [tuple(p) for p in t.user_attrs["curve"]]


def _wandb_records(path: Path):
    """Parse a W&B offline `.wandb` file: a LevelDB-style log (32 KiB blocks of crc/len/type-framed chunks) of
    protobuf Records after a 7-byte ':W&B' header."""
    from wandb.proto import wandb_internal_pb2

    data, pos, chunk = path.read_bytes(), 7, b""
    assert data[:4] == b":W&B"
    while pos + 7 <= len(data):
        left = 32768 - pos % 32768
        _, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        if left < 7 or (length == 0 and kind == 0):  # block trailer padding
            pos += left
            continue
        chunk += data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):  # a full record, or the last piece of one
            record = wandb_internal_pb2.Record()
            record.ParseFromString(chunk)
            chunk = b""
            yield record


def _check_wandb(folder: Path, finished) -> None:
    runs = {}
    for path in folder.glob("wandb/offline-run-*/run-*.wandb"):
        records = list(_wandb_records(path))
        run = next(r.run for r in records if r.WhichOneof("record_type") == "run")
        config = {u.key: json.loads(u.value_json) for u in run.config.update}
        history = [
            {i.nested_key[0] if i.nested_key else i.key: json.loads(i.value_json) for i in r.history.item}
            for r in records
            if r.WhichOneof("record_type") == "history"
        ]
        runs[config["trial"]] = (run, config, [(h["tokens"], h["val_loss"]) for h in history if "val_loss" in h])
    assert sorted(runs) == sorted(t.number for t in finished)
    for t in finished:
        run, config, curve = runs[t.number]
        assert run.project == "tiny" and run.run_group == "tiny" and config["schedule"] == t.user_attrs["schedule"]
        assert curve == [tuple(p) for p in t.user_attrs["curve"]]


def _check_tensorboard(folder: Path, finished) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    assert sorted(p.name for p in (folder / "tiny").iterdir()) == sorted(f"trial-{t.number:05d}" for t in finished)
    for t in finished:
        events = EventAccumulator(str(folder / "tiny" / f"trial-{t.number:05d}"))
        events.Reload()
        curve = [(e.step, pytest.approx(e.value, rel=1e-6)) for e in events.Scalars("val_loss")]
        assert curve == [tuple(p) for p in t.user_attrs["curve"]]
        assert events.Scalars("tokens_per_s")[0].value == pytest.approx(t.user_attrs["tokens_per_s"], rel=1e-6)


@pytest.mark.e2e
def test_every_finished_trial_reaches_mlflow_files_tensorboard_and_wandb(ray_local, tiny_config, tmp_path, monkeypatch):
    monkeypatch.delenv("WANDB_MODE", raising=False)  # offline is the default: no network here
    finished = _run(tiny_config, 3, mlflow=str(tmp_path / "mlruns"), tensorboard=str(tmp_path / "tb"), wandb=str(tmp_path / "wb"))
    assert {t.state for t in finished} <= {TrialState.COMPLETE, TrialState.PRUNED}
    _check_mlflow(str(tmp_path / "mlruns"), finished)
    _check_tensorboard(tmp_path / "tb", finished)
    _check_wandb(tmp_path / "wb", finished)


@pytest.fixture
def mlflow_server(tmp_path):
    port = _free_port()
    proc = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "mlflow"),
            "server",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            "1",
            "--backend-store-uri",
            f"sqlite:///{tmp_path / 'server.db'}",
            "--default-artifact-root",
            str(tmp_path / "art"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(f"{url}/health", timeout=2)
                break
            except OSError:
                assert time.monotonic() < deadline and proc.poll() is None, "mlflow server did not come up"
                time.sleep(0.5)
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


@pytest.mark.e2e
def test_a_real_mlflow_server_gets_the_study(ray_local, tiny_config, mlflow_server):
    _check_mlflow(mlflow_server, _run(tiny_config, 2, mlflow=mlflow_server))


@pytest.mark.e2e
def test_an_unreachable_tracker_is_a_warning_and_the_study_goes_on(ray_local, tiny_config, tmp_path, caplog):
    closed = f"http://prism:s3cret@127.0.0.1:{_free_port()}"  # nothing listens there; its password is never shown
    with caplog.at_level(logging.WARNING, logger="search.tracking"):
        finished = _run(tiny_config, 2, mlflow=closed, tensorboard=str(tmp_path / "tb"))
    warnings = [r.getMessage() for r in caplog.records if r.name == "search.tracking"]
    assert len(warnings) == 1 and warnings[0].startswith(f"tracking.mlflow ({mask_url(closed)}) failed on trial")
    assert "s3cret" not in warnings[0]
    _check_tensorboard(tmp_path / "tb", finished)  # the other tracker kept logging
