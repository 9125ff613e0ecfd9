"""Every family, sampler and pruner end to end: real Ray workers, real training, SQLite and PostgreSQL."""

import optuna
import pytest
from optuna.trial import TrialState

from prism import Schedule
from search.analysis.summary import summarize
from search.attrs import DUPLICATE_ATTR
from search.config import StudyConfig
from search.runner.driver import Driver
from search.runner.preflight import check_corpus
from search.storage import open_storage
from search.storage.records import FINISHED
from search.study.create import open_study
from search.study.policy import Exhausted, Standing, search_policies
from search.study.pruning import make_stopping
from search.study.samplers import reachable_target
from search.text import gap_text

pytestmark = pytest.mark.e2e

# each case is one study; together they cover every family, sampler and pruner, the duplicate cache (a reference
# that equals the running baseline, a grid that revisits it), the throughput constraint and multi-objective stopping
CASES = {
    "ramp-tpe-hyperband": dict(n_trials=4, space={"family": "ramp"}, search={"sampler": "tpe", "pruner": "hyperband"}),
    "ramp+late-gp-median": dict(
        n_trials=4,
        space={"family": "ramp+late", "late_zone": (0.5, 0.9)},
        search={"sampler": "gp", "pruner": "median", "n_startup_trials": 1},
    ),
    "free-random-none": dict(
        n_trials=5,
        space={"family": "free", "references": ["twin=1x3", "paper-ramp"]},
        search={"sampler": "random", "pruner": "none", "baseline_seeds": 1},
    ),
    "uniform-grid-successive-halving": dict(
        n_trials=20,
        space={"family": "uniform"},
        search={"sampler": "grid", "pruner": "successive-halving"},
    ),
    "ramp-nsga2-multiobjective": dict(
        n_trials=6,
        space={"family": "ramp"},
        search={
            "sampler": "nsga2",
            "population_size": 2,
            "objectives": ["val_loss", "throughput"],
            "pruner": "successive-halving",
            "min_resource_evals": 2,
            "reduction_factor": 2,
            "min_throughput_ratio": 0.95,
        },
    ),
}


def _config(tiny_config: StudyConfig, storage: str, case: dict) -> StudyConfig:
    """Only the multi-objective case needs tiny's full 60 steps (its rung sits at 40); the rest train 40."""
    data = tiny_config.model_dump()
    data["storage"], data["n_trials"] = storage, case["n_trials"]
    data["space"] |= case["space"]
    data["search"] |= {"throughput_probe_steps": 4} | case["search"]
    if len(data["search"].get("objectives", [])) < 2:
        data["train"] |= {"steps": 40}
    return StudyConfig.model_validate(data)


def _run(config: StudyConfig, workers: int = 2) -> optuna.Study:
    fingerprint = check_corpus(config)
    ctx = open_study(config, open_storage(config.storage), fingerprint)
    study = ctx.study
    target = reachable_target(study, config.n_trials)  # the grid case ends with its space
    Driver(ctx, stopping=make_stopping(ctx), policies=search_policies(config, ctx.family)).run(target, n_workers=workers)  # as `run` does
    return optuna.load_study(study_name=config.name, storage=config.storage)  # read back with the stock library


def _check(config: StudyConfig, study: optuna.Study, expected_trained: int) -> list:
    trials = study.get_trials()
    assert sum(t.state in FINISHED and DUPLICATE_ATTR not in t.user_attrs for t in trials) == expected_trained  # served ones do not count
    assert not [t for t in trials if t.state in (TrialState.RUNNING, TrialState.WAITING, TrialState.FAIL)]
    family = config.family
    trained: dict[tuple[str, int], optuna.trial.FrozenTrial] = {}
    for t in trials:
        schedule = Schedule.parse(t.user_attrs["schedule"])
        assert family.contains(schedule) or t.user_attrs["role"] != "search"
        assert t.user_attrs["throughput_ratio"] > 0 and t.user_attrs["tokens_per_s"] > 0
        key = (t.user_attrs["schedule"], t.user_attrs["seed"])
        if DUPLICATE_ATTR in t.user_attrs:
            assert "worker" not in t.user_attrs  # served, never sent to a worker
        else:
            assert key not in trained, f"{key} trained twice"
            trained[key] = t
    for t in trials:  # every copy carries exactly its original's outcome
        if DUPLICATE_ATTR in t.user_attrs:
            original = trials[t.user_attrs[DUPLICATE_ATTR]]
            assert (t.state, t.values, t.user_attrs["curve"]) == (original.state, original.values, original.user_attrs["curve"])
    summary = summarize(study)
    assert summary.best_schedule is not None and summary.baseline_value is not None
    return trials


def _case_checks(name: str, config: StudyConfig, trials: list, study: optuna.Study) -> None:
    summary = summarize(study)
    if name == "uniform-grid-successive-halving":
        grid = [t.user_attrs["schedule"] for t in trials if t.user_attrs["role"] == "search"]
        assert grid == [str(s) for s in config.family.enumerate()]  # every schedule once, in order
        assert trials[2].user_attrs[DUPLICATE_ATTR] == 0  # the grid's 1x3 at seed 0 is the baseline's run
        assert summary.uniform_noise_floor is not None and "selected as best of" in gap_text(summary)
        assert Standing.of(trials, config).stopped == Exhausted(3, "uniform")
    if name == "free-random-none":
        refs = {t.user_attrs["reference"]: t for t in trials if t.user_attrs["role"] == "reference"}
        assert set(refs) == {"twin", "paper-ramp"} and all(r.user_attrs[DUPLICATE_ATTR] == 0 for r in refs.values())
        assert {r.name for r in summary.references} == {"twin", "paper-ramp"}
    if name == "ramp-nsga2-multiobjective":
        assert len(study.directions) == 2 and summary.pareto
        done = [t for t in trials if t.state == TrialState.COMPLETE]
        assert done and all(t.values[1] == t.user_attrs["throughput_ratio"] for t in done)  # the paired ratio, maximised
        infeasible = {t.number for t in trials if any(v > 0 for v in t.constraints.values())}
        assert all(t.constraints for t in trials)  # every trial carries its throughput constraint
        assert not infeasible & {p.number for p in summary.pareto}
        assert all("rung_0" in t.user_attrs for t in trials)
        # the baselines reach the rung first (they start first on the 2 workers) and set the bar: training is
        # deterministic, so the weaker search trials are stopped there, never later than the rung's 40 steps
        pruned = [t for t in trials if t.state == TrialState.PRUNED]
        assert pruned and all(t.user_attrs["role"] == "search" for t in pruned)
        assert all(t.user_attrs["pruned_at_rung"] == 0 and t.user_attrs["tokens"] == 40 * 8 * 32 for t in pruned)


def _run_case(name: str, config: StudyConfig) -> None:
    study = _run(config)
    expected = 2 + 2 if name.startswith("uniform-grid") else config.n_trials  # the grid ends with its space; 1x3 was served
    trials = _check(config, study, expected)
    _case_checks(name, config, trials, study)


@pytest.mark.parametrize("name", list(CASES))
def test_family_sampler_pruner_end_to_end_on_sqlite(ray_local, tiny_config, name):
    _run_case(name, _config(tiny_config, tiny_config.storage, CASES[name]))


@pytest.mark.parametrize("name", list(CASES))
def test_family_sampler_pruner_end_to_end_on_postgresql(ray_local, tiny_config, pg_url, name):
    _run_case(name, _config(tiny_config, pg_url, CASES[name]))
