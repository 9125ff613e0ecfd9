"""A schedule that failed by its own error is not trained again: proposed again (at any seed) it is failed at once,
untrained, and counts toward neither n_trials nor max_failed_trials. Real Ray, real SQLite, a user's python trainer
that fails for one schedule as a trainer out of memory would."""

import pytest
from optuna.trial import TrialState

from search.analysis import summarize
from search.analysis.budget import budget
from search.config import parse_config
from search.runner.driver import Driver
from search.runner.preflight import check_corpus
from search.storage import open_storage
from search.storage.records import enqueue
from search.study.create import open_study
from search.study.pruning import make_stopping
from search.study.samplers import taken_schedules

pytestmark = pytest.mark.e2e

FAILING = "1x1,2x1,4x1"
TRAINER = f"""
def run(request, reporter):
    if request.schedule == {FAILING!r}:
        raise RuntimeError("CUDA out of memory (simulated)")
    reporter.start(n_params=1000)
    loss = 3.0 + 0.01 * sum(request.heads) + 0.001 * request.seed
    for step in range(request.eval_every, request.steps + 1, request.eval_every):
        reporter.evaluated(step=step, tokens=step * 64, val_loss=loss)
    reporter.end(val_loss=loss, tokens_per_s=1000.0, n_params=1000)
"""


def test_a_schedule_that_failed_itself_is_served_as_failed_at_any_seed_and_not_counted(ray_local, tiny_config, tmp_path):
    from prism import Schedule

    (tmp_path / "flaky.py").write_text(TRAINER)
    data = tiny_config.model_dump() | {"n_trials": 3}
    data["trainer"] = {"kind": "python", "function": "flaky:run", "path": [str(tmp_path)]}
    data["resources"] |= {"workers": 1}
    data["search"] |= {"max_failed_trials": 1}  # a second counted failure would stop the study
    config = parse_config(data, "test")
    ctx = open_study(config, open_storage(config.storage), check_corpus(config))
    for seed in (config.seed, config.seed, config.seed + 1):  # proposed three times, at two seeds
        enqueue(ctx.study, ctx.family, Schedule.parse(FAILING), role="search", seed=seed)
    driver = Driver(ctx, stopping=make_stopping(ctx))
    driver.run(config.n_trials, n_workers=1)

    runs = [t for t in ctx.study.get_trials() if t.user_attrs.get("schedule") == FAILING]
    assert [t.state for t in runs] == [TrialState.FAIL] * 3
    original, *served = runs
    assert original.user_attrs["failed_itself"] and "CUDA out of memory" in original.user_attrs["error"]
    assert all(t.user_attrs["duplicate_of"] == original.number for t in served)
    assert all(t.user_attrs["error"] == f"not trained: {FAILING} failed in trial {original.number}" for t in served)
    assert driver.failures == 1  # the original only: the study went on past max_failed_trials = 1
    done = budget(ctx.study.get_trials(), config.seed)
    assert done.trained == 3 and done.failed == {FAILING}
    assert FAILING in taken_schedules(ctx.study, config.seed + 7)  # the sampler is told, at every seed
    failed = summarize(ctx.study, config).failed_trials  # status lists the schedule once, with its own error
    assert [(f.number, f.schedule) for f in failed] == [(original.number, FAILING)] and "CUDA out of memory" in failed[0].error
