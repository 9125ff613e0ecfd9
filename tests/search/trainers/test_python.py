"""The python trainer: the example's `run` function trained on a thread of this process, in step with the caller."""

import threading

import pytest

from search.runner.messages import Evaluated, Finished
from search.runner.outside import PythonSession
from search.trainers import TrainerError
from tests.search.trainers.conftest import EXAMPLE, spec_for


@pytest.fixture
def python_config(tmp_path):
    """The example study with a python [trainer] section in place of its command."""
    import tomllib

    from search.config import parse_config

    def make(function="train_gpt:run", extra=""):
        text = (EXAMPLE / "study.toml").read_text().partition("[trainer]")[0]
        text += f'[trainer]\nkind = "python"\nfunction = "{function}"\npath = ["{EXAMPLE}", "{tmp_path}"]\n{extra}'
        data = tomllib.loads(text) | {"checkpoint_dir": str(tmp_path / "checkpoints")}
        return parse_config(data)

    return make


def test_the_example_function_trains_evaluation_by_evaluation_and_finishes(python_config):
    config = python_config()
    session = PythonSession()
    started = session.start(spec_for(config, "1x1,2x1,4x1"))
    assert "trainer_pid" not in started.where  # it runs in the worker's own process
    points = []
    while isinstance(out := session.advance(), Evaluated):
        points.append(out.point)
    assert isinstance(out, Finished) and [p.step for p in points] == list(range(10, 31, 10))
    result = out.result
    assert result.final_val_loss == points[-1].val_loss and result.tokens_per_s > 0 and result.n_params > 0
    assert result.extra["throughput_ratio"] > 0 and not result.stopped_early


def test_stop_ends_the_function_at_its_report(python_config):
    session = PythonSession()
    session.start(spec_for(python_config(), "4x3", baseline=False))
    assert isinstance(session.advance(), Evaluated)
    thread = session.trial.events.thread
    finished = session.stop()
    assert finished.result.stopped_early and finished.result.curve[-1].step == 10
    assert not thread.is_alive() and thread not in threading.enumerate()


def test_a_function_that_raises_fails_its_trial_with_the_error(python_config, tmp_path):
    (tmp_path / "broken.py").write_text(
        "def run(request, reporter):\n    reporter.start(n_params=10)\n    raise ValueError(f'no data at {request.corpus}')\n"
    )
    session = PythonSession()
    session.start(spec_for(python_config("broken:run"), "4x3", baseline=False))
    with pytest.raises(TrainerError, match=r"broken:run raised ValueError: no data at .*shakespeare_milton.txt.xz"):
        session.advance()


def test_a_figure_the_trainer_does_not_report_is_stored_as_unknown_not_zero(python_config, tmp_path):
    """FLOPs per token is optional in the protocol: a trainer that does not say has none stored (shown as unknown),
    where a 0 once read as a measured figure."""
    from search.storage.records import result_attrs

    (tmp_path / "quiet.py").write_text(
        "def run(request, reporter):\n"
        "    reporter.start(n_params=100)\n"
        "    reporter.evaluated(step=request.steps, tokens=request.tokens, val_loss=3.0)\n"
        "    reporter.end(val_loss=3.0, tokens_per_s=500.0, n_params=100)\n"
    )
    session = PythonSession()
    started = session.start(spec_for(python_config("quiet:run"), "4x3", baseline=False))
    assert started.where["call"].startswith("from quiet import run; run(request, reporter)")
    while isinstance(out := session.advance(), Evaluated):
        pass
    assert out.result.flops_per_token is None and "flops_per_token" not in result_attrs(out.result)
