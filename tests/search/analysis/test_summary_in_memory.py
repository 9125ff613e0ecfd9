"""summarize's decisions on studies held in memory (optuna's InMemoryStorage, trials built with create_trial): the
ranking, the paired gaps, the verdict, confirmation rows, failed and not-finite runs, hardware pairs and the
experiment's looks, each in milliseconds, so a change to search.analysis.summary is caught fast. The two driver
checks need a database (heartbeats, a driver lock) and use a SQLite file."""

import math
import statistics
import subprocess

import optuna
import pytest
from optuna.trial import FrozenTrial, TrialState, create_trial

from search.analysis.blocked import Fit
from search.analysis.summary import (
    DriverGone,
    FailedRun,
    NotFinite,
    ParetoPoint,
    Summary,
    Unsaved,
    auto_pruning_start,
    confirmation_rows,
    full_curves,
    pareto_front,
    ranked,
    schedule_ranking,
    summarize,
)
from search.attrs import ATTR_CHECKPOINT_ERROR, ATTR_CONFIG, CURVE, DUPLICATE_ATTR, THROUGHPUT_RATIO
from search.config import ExperimentSection, StudyConfig, load_config
from search.text import summary_json, verdict_json
from search.text.summary import best_how
from tests.search.conftest import ROOT

UNIFORM = "1x3"  # studies/tiny.toml's baseline
TINY = load_config(ROOT / "studies" / "tiny.toml")
CONFIRM = "prism-search confirm known"


def command(s: Summary) -> str | None:
    """The confirm command the verdict names, as `status --json` writes it."""
    return summary_json(s)["verdict"]["command"]


AVX512, AVX2 = {"pid": 1, "kernels": "cpu AVX512"}, {"pid": 2, "kernels": "cpu AVX2"}


def run(schedule: str | None, seed: int | None, loss: float | None, role: str = "search", **attrs) -> FrozenTrial:
    """A finished run as a worker stores it (COMPLETE unless `state` is given); `reported`: its intermediate values."""
    state = attrs.pop("state", TrialState.COMPLETE)
    reported = attrs.pop("reported", {})
    constraints = attrs.pop("constraints", None)
    names = {"schedule": schedule, "seed": seed, "role": role}
    user_attrs = {k: v for k, v in names.items() if v is not None} | attrs
    values = loss if isinstance(loss, list) else None
    value = None if values is not None else loss
    return create_trial(
        state=state, value=value, values=values, user_attrs=user_attrs, intermediate_values=reported, constraints=constraints
    )


def study_of(*trials: FrozenTrial, objectives: int = 1) -> optuna.Study:
    study = optuna.create_study(study_name="known", directions=["minimize", "maximize"][:objectives])  # no storage: in memory
    study.add_trials(trials)
    return study


def searched() -> list[FrozenTrial]:
    """Uniform at both baseline seeds, two searched schedules and a reference at the study seed 0."""
    return [
        run(UNIFORM, 0, 2.05, "baseline"),
        run(UNIFORM, 1, 2.08, "baseline"),
        run("4x3", 0, 2.00),  # the best on the search seed: gap -0.05 from one pair
        run("2x3", 0, 2.03),
        run("1x1,2x1,4x1", 0, 2.10, "reference", reference="ramp"),
    ]


def confirmed(schedule: str, losses: list[float], first_seed: int = 1000) -> list[FrozenTrial]:
    return [run(schedule, first_seed + i, loss, "confirm") for i, loss in enumerate(losses)]


def with_search(config: StudyConfig, **changes) -> StudyConfig:
    return config.model_copy(update={"search": config.search.model_copy(update=changes)})


def test_the_best_is_the_paired_mean_leader_picked_from_every_schedule_on_the_study_seed():
    study = study_of(*searched())
    s = summarize(study, TINY)
    assert (s.name, s.best_schedule, s.best_number, s.best_seeds) == ("known", "4x3", 2, (0,))
    assert s.best_value == 2.00 and s.baseline_value == 2.05 and s.baseline_schedule == UNIFORM
    assert s.best_gap.all_seeds.n == 1 and s.best_gap.all_seeds.mean == pytest.approx(-0.05)
    assert s.best_gap.unselected is None and s.best_gap.selected_from == 4  # uniform, two searched, one reference
    assert [g.schedule for g in s.gaps] == ["4x3", "2x3", "1x1,2x1,4x1"] == schedule_ranking(study.trials, TINY)
    assert s.method == Fit(None, 0, False) and not s.uniform_is_best and s.runner_up is None and not s.is_experiment
    assert s.verdict.kind == "undecided" and s.verdict.schedule == "4x3" and s.verdict.margin == TINY.search.margin
    assert command(s) == f"{CONFIRM} --top 3 --seeds 3"  # no noise measured: every schedule is still open
    assert s.uniform_noise_floor == pytest.approx(statistics.stdev([2.05, 2.08]))
    (ref,) = s.references
    assert (ref.name, ref.schedule, ref.val_loss) == ("ramp", "1x1,2x1,4x1", 2.10)
    assert ref.gap.all_seeds.mean == pytest.approx(0.05) and ref.gap.selected_from is None
    assert ref.gap.unselected is None  # never selected: its every seed is unselected, shown once
    assert s.counts == {"COMPLETE": 5} and s.n_trials == TINY.n_trials and s.trained == 5 and s.objectives == ["val_loss"]
    assert s.deciding is not None and s.deciding.runs > 0  # undecided: what its command still trains
    assert (s.duplicates, s.confirmation_runs, s.infeasible, s.pareto, s.failed_runs, s.not_finite) == (0, 0, 0, [], [], [])
    assert s.driver_gone is None and s.left_out == {} and s.plan is None and s.looks is None


def test_the_stored_config_is_read_when_the_command_passes_none():
    study = study_of(*searched())
    with pytest.raises(Exception, match="no stored config"):
        summarize(study)
    study.set_user_attr(ATTR_CONFIG, TINY.model_copy(update={"search": TINY.search.model_copy(update={"margin": 0.02})}).model_dump_json())
    assert summarize(study).verdict.margin == 0.02 and summarize(study, TINY).verdict.margin == TINY.search.margin


def test_ranked_competes_feasible_finite_runs_at_the_study_seed_only():
    """Baseline repeats at other seeds, confirmation runs, infeasible and non-finite runs never compete."""
    trials = [
        run("4x3", 0, 2.02),
        run("2x3", 0, 2.01, constraints={THROUGHPUT_RATIO: 0.2}),  # slower than allowed
        run(UNIFORM, 1, 1.90, "baseline"),
        run("2x6", 1000, 1.80, "confirm"),
        run("2x6", 0, 1.95, "confirm"),  # a confirm run at the study seed: still measures noise only
        run("6x3", 0, math.inf),
        run(None, None, 2.00),  # a trial with no seed attr is at the study seed
        run(UNIFORM, 0, 2.03, "baseline"),
    ]
    study = study_of(*trials)
    assert [t.number for t in ranked(study, TINY)] == [6, 0, 7]
    s = summarize(study, TINY)
    assert s.infeasible == 1 and [g.schedule for g in s.gaps] == ["2x6", "4x3"]  # a confirm run pairs; the infeasible one does not


def test_the_baseline_is_the_baseline_run_never_a_search_trial_that_trained_uniform():
    study = study_of(*searched(), run(UNIFORM, 0, 2.20))  # a later search run of (uniform, study seed)
    s = summarize(study, TINY)
    assert s.baseline_value == 2.05 and s.best_gap.all_seeds.mean == pytest.approx(-0.05)
    assert s.references[0].gap.all_seeds.mean == pytest.approx(0.05)

    failed = study_of(
        run(UNIFORM, 0, None, "baseline", state=TrialState.FAIL),
        run(UNIFORM, 0, 2.20),
        run("4x3", 0, 2.00),
        run("1x1,2x1,4x1", 0, 2.10, "reference", reference="ramp"),
    )
    s = summarize(failed, TINY)  # no baseline run completed: none stands in for it, and the best run is named
    assert s.baseline_value is None and s.best_gap is None and s.gaps == []
    assert s.verdict.kind == "undecided" and s.best_schedule == "4x3" and s.best_number == 2 and s.best_value == 2.00
    assert s.references[0].gap.all_seeds is None and s.references[0].gap.unselected is None  # nothing to pair with
    lowest = study_of(run(UNIFORM, 0, None, "baseline", state=TrialState.FAIL), run(UNIFORM, 0, 1.90), run("4x3", 0, 2.00))
    s = summarize(lowest, TINY)  # the best run trained the uniform schedule: shown with its own value, paired with nothing
    assert (s.best_schedule, s.best_number, s.best_value, s.best_seeds, s.baseline_value) == (UNIFORM, 1, 1.90, (), None)
    assert summarize(study_of(), TINY).best_schedule is None and summarize(study_of(), TINY).best_number is None


def test_a_baseline_at_another_seed_is_not_the_paired_baseline():
    study = study_of(run(UNIFORM, 1, 2.05, "baseline"), run("4x3", 1, 2.00, "confirm"), run("2x3", 0, 2.03))
    s = summarize(study, TINY)  # uniform ran only at seed 1: 4x3 pairs there, 2x3 pairs nowhere
    assert [g.schedule for g in s.gaps] == ["4x3"] and s.gaps[0].seeds == (1,) and s.best_schedule == "4x3"
    assert s.best_number == 1 and s.best_seeds == (1,) and s.best_value == 2.00 and s.baseline_value == 2.05


def test_an_undecided_study_still_names_the_schedule_measured_worse_than_uniform():
    """4x3's gap is inside the noise; 2x3 is worse by about 0.05 at every seed: undecided, with 2x3 named worse."""
    trials = []
    for seed, (u, a, b) in enumerate([(2.05, 2.02, 2.10), (2.08, 2.10, 2.131), (2.02, 2.00, 2.069), (2.06, 2.07, 2.112)]):
        role = "search" if seed == 0 else "confirm"
        trials += [run(UNIFORM, seed, u, "baseline" if seed < 2 else "confirm"), run("4x3", seed, a, role), run("2x3", seed, b, role)]
    s = summarize(study_of(*trials), TINY)
    assert s.verdict.kind == "undecided" and s.verdict.schedule == "4x3" and command(s).startswith(f"{CONFIRM} --top 1 ")
    ((schedule, mean, p),) = s.verdict.worse
    assert schedule == "2x3" and mean == pytest.approx(0.0505) and p < 0.05 and [g.schedule for g in s.gaps] == ["4x3", "2x3"]


def test_when_uniform_is_the_best_the_gap_shown_is_the_runner_up_s():
    study = study_of(run(UNIFORM, 0, 2.00, "baseline"))
    s = summarize(study, TINY)
    assert s.best_schedule == UNIFORM and s.uniform_is_best and s.best_gap is None and s.runner_up is None
    assert s.best_number == 0 and s.best_value == 2.00 and s.baseline_value == 2.00
    study.add_trials([run("4x3", 0, 2.03), run("2x3", 0, 2.01)])
    s = summarize(study, TINY)
    assert s.best_schedule == UNIFORM and s.runner_up == "2x3" and s.uniform_is_best
    assert s.best_gap.all_seeds.mean == pytest.approx(0.01) and s.best_gap.selected_from == 2  # picked of the 2 others
    assert command(s) == f"{CONFIRM} --top 2 --seeds 3"


def test_a_reference_without_a_name_is_named_by_its_schedule():
    s = summarize(study_of(run(UNIFORM, 0, 2.05, "baseline"), run("1x1,2x1,4x1", 0, 2.10, "reference")), TINY)
    assert [(r.name, r.schedule) for r in s.references] == [("1x1,2x1,4x1", "1x1,2x1,4x1")]


def test_the_best_s_trial_is_its_run_at_the_study_seed_even_when_another_finished_first():
    trials = [
        run(UNIFORM, 1000, 2.10, "confirm"),
        run("4x3", 1000, 2.00, "confirm"),
        run(UNIFORM, 0, 2.05, "baseline"),
        run("4x3", 0, 2.01),
    ]
    s = summarize(study_of(*trials), TINY)
    assert s.best_schedule == "4x3" and s.best_number == 3 and s.best_seeds == (0, 1000)


def test_a_schedule_called_better_is_the_best_even_where_one_lucky_seed_puts_another_ahead():
    """The positive control's status named `2x1,8x1` (one seed) best under the verdict "better: 8x2": the best of
    one seed is selected on that seed, so the confirmed schedule is what `status` and `best` name. The rung check
    asks about the best by mean, as `min_resource_evals = "auto"` does."""

    def curved(schedule: str, seed: int, loss: float, role: str = "search") -> FrozenTrial:
        return run(schedule, seed, loss, role, reported={1: loss + 0.5, 2: loss})

    trials = [
        curved(UNIFORM, 0, 2.05, "baseline"),
        curved("4x3", 0, 1.95),
        curved("2x3", 0, 1.60),  # ahead by its one seed
        *[curved(UNIFORM, 1000 + k, loss, "confirm") for k, loss in enumerate([2.00, 2.10, 2.05, 1.95])],
        *[curved("4x3", 1000 + k, loss, "confirm") for k, loss in enumerate([1.90, 2.01, 1.95, 1.86])],
    ]
    s = summarize(study_of(*trials), TINY)
    assert s.gaps[0].schedule == "2x3" and (s.verdict.kind, s.verdict.schedule) == ("better", "4x3")
    assert (s.best_schedule, s.best_number, s.best_seeds) == ("4x3", 1, (0, 1000, 1001, 1002, 1003))
    assert best_how(s) == "the verdict's, 5 seeds"  # the status row says why this one, not by its mean
    assert s.fidelity is not None and [rung.best for rung in s.fidelity] == ["2x3"]


def test_a_schedule_tied_with_uniform_is_named_best_not_uniform():
    """Uniform wins only when every other schedule's gap is above 0: a tie names the other schedule."""
    s = summarize(study_of(run(UNIFORM, 0, 2.05, "baseline"), run("4x3", 0, 2.05)), TINY)
    assert s.best_schedule == "4x3" and s.runner_up is None and s.best_gap.selected_from == 2


def test_the_confirmed_gap_uses_only_confirmation_seeds_and_confirm_runs_never_compete():
    trials = [*searched(), *confirmed(UNIFORM, [1.50, 1.60, 1.70]), *confirmed("4x3", [1.49, 1.58, 1.67])]
    trials.append(run("4x3", 1000, 1.49, "confirm", **{DUPLICATE_ATTR: 6}))  # a cache hit: the same run, counted once
    s = summarize(study_of(*trials), TINY)
    assert s.best_schedule == "4x3" and s.best_number == 2  # the confirm runs' lower losses never make them "best"
    fresh = s.best_gap.unselected  # off its selection seed: diffs -0.01, -0.02, -0.03
    assert fresh.n == 3 and fresh.mean == pytest.approx(-0.02) and fresh.adjusted_p is not None and fresh.adjusted_p >= fresh.p
    assert s.best_gap.all_seeds.n == 4 and s.best_gap.all_seeds.mean == pytest.approx(-0.0275)
    assert s.best_seeds == (0, 1000, 1001, 1002) and s.best_value == pytest.approx(1.685) and s.baseline_value == pytest.approx(1.7125)
    assert s.confirmation_runs == 6 and s.duplicates == 1 and s.trained == 5
    assert s.uniform_noise_floor == pytest.approx(statistics.stdev([2.05, 2.08]))  # the baseline runs' alone
    rows = s.confirmation
    assert [r.schedule for r in rows] == [UNIFORM, "4x3"] and [r.seeds for r in rows] == [3, 3]
    assert rows[0].gap is None and rows[0].val_loss_mean == pytest.approx(1.60)
    assert rows[1].gap.mean == pytest.approx(-0.02) and rows[1].gap.n == 3
    assert rows[1].val_loss_mean == pytest.approx(1.58) and rows[1].val_loss_std == pytest.approx(0.09)
    assert summary_json(s)["best_gap"]["unselected"]["n"] == 3 and summary_json(s)["confirmation"][1]["seeds"] == 3


def test_confirmation_rows_put_uniform_first_then_the_lowest_mean():
    """Only finished confirmation seeds count; a schedule with one run has no sd, one with none no mean."""
    trials = [
        *confirmed("2x3", [1.62, 1.72]),
        *confirmed(UNIFORM, [1.50, 1.60, 1.70]),
        *confirmed("4x3", [1.49, 1.58, 1.67]),
        run("6x3", 1000, 1.30, "confirm"),
        run("2x3", 1002, None, "confirm", state=TrialState.FAIL),
        run("3x3", 1003, None, "confirm", state=TrialState.RUNNING),
        run(UNIFORM, 5, 1.0, "baseline"),  # not a confirmation seed: in no row
    ]
    more = [f"{k}x6" for k in range(1, 5)]  # the more rows, the less a wrong order can match by chance (a set's order)
    trials += [run(schedule, 1000, 1.80 + 0.01 * k, "confirm") for k, schedule in enumerate(more)]
    rows = confirmation_rows(trials, UNIFORM)
    assert [r.schedule for r in rows] == [UNIFORM, "6x3", "4x3", "2x3", *more, "3x3"]
    assert [r.seeds for r in rows] == [3, 1, 3, 2, 1, 1, 1, 1, 0] and rows[0].val_loss_mean == pytest.approx(1.60)
    assert rows[1].val_loss_std is None and rows[1].gap.n == 1 and rows[1].gap.mean == pytest.approx(-0.2)
    assert rows[3].val_loss_mean == pytest.approx(1.67) and rows[3].val_loss_std == pytest.approx(statistics.stdev([1.62, 1.72]))
    assert rows[3].gap.n == 2 and rows[3].gap.mean == pytest.approx(0.12)
    assert rows[-1].val_loss_mean is None and rows[-1].val_loss_std is None and rows[-1].gap is None


def test_failed_runs_are_listed_once_by_role_and_a_served_copy_is_no_failure():
    trials = [
        run(UNIFORM, 0, None, "baseline", state=TrialState.FAIL, error="worker died (retry 1/2 queued)"),
        run(UNIFORM, 0, 2.05, "baseline"),  # its retry trained: not failed
        run(UNIFORM, 1, None, "baseline", state=TrialState.FAIL, error="worker died"),
        run(UNIFORM, 1, None, "baseline", state=TrialState.FAIL, error="TrainingDiverged: loss 9.1"),
        run("1x1,2x1,4x1", 0, None, "reference", state=TrialState.FAIL, reference="ramp"),
        run("4x3", 0, None, state=TrialState.FAIL, error="worker died"),
        run("2x3", 0, None, state=TrialState.FAIL, error="a copy", **{DUPLICATE_ATTR: 5}),  # answered without training
        run(None, None, None, state=TrialState.FAIL, error="failed before its attrs"),  # no run to name
        run("2x6", None, None, state=TrialState.FAIL),  # a schedule without a seed names no run either
    ]
    s = summarize(study_of(*trials), TINY)
    assert s.failed_runs == [
        FailedRun(3, "baseline", UNIFORM, 1, "TrainingDiverged: loss 9.1"),
        FailedRun(4, "reference", "1x1,2x1,4x1", 0, None),
    ]
    assert s.failed_trials == [FailedRun(5, "search", "4x3", 0, "worker died")]
    assert s.counts == {"COMPLETE": 1, "FAIL": 8}


def test_a_run_whose_value_is_not_finite_is_named_and_left_out_of_every_number():
    config = with_search(TINY, objectives=["val_loss", "tokens_per_s"])
    trials = [run(UNIFORM, 0, [2.05, 900.0], "baseline"), run("4x3", 0, [math.inf, 1000.0]), run("2x3", 0, [2.01, math.inf])]
    s = summarize(study_of(*trials, objectives=2), config)
    assert s.not_finite == [NotFinite(1, "4x3", 0, {"val_loss": math.inf}), NotFinite(2, "2x3", 0, {"tokens_per_s": math.inf})]
    assert s.gaps == [] and s.best_schedule == UNIFORM and s.objectives == ["val_loss", "tokens_per_s"]


def test_pareto_front_keeps_the_points_nothing_beats_on_both_loss_and_speed():
    points = [(2.0, 100.0), (1.9, 90.0), (2.1, 120.0), (2.2, 110.0), (1.9, 95.0), (2.0, 100.0)]
    assert sorted(pareto_front(points)) == [0, 2, 4]  # 1 and 3 are dominated; 5 ties 0 and is not ahead of it
    assert pareto_front([]) == [] and pareto_front([(3.0, -5.0)]) == [0]


def test_a_two_objective_study_reports_its_front_one_point_per_schedule():
    config = with_search(TINY, objectives=["val_loss", "tokens_per_s"])
    trials = [
        run(UNIFORM, 0, [2.05, 1000.0], "baseline"),
        run("4x3", 0, [2.00, 900.0]),
        run("2x3", 0, [2.10, 800.0]),  # dominated by uniform
        run("4x3", 0, [2.00, 900.0], **{DUPLICATE_ATTR: 1}),  # served: the same point, listed once
        run("2x6", 0, [1.95, 2000.0], constraints={THROUGHPUT_RATIO: 0.1}),  # infeasible: never on the front
    ]
    s = summarize(study_of(*trials, objectives=2), config)
    assert s.pareto == [
        ParetoPoint(1, "4x3", {"val_loss": 2.00, "tokens_per_s": 900.0}),
        ParetoPoint(0, UNIFORM, {"val_loss": 2.05, "tokens_per_s": 1000.0}),
    ]
    assert s.pareto[0].items() == [("number", 1), ("schedule", "4x3"), ("val_loss", 2.00), ("tokens_per_s", 900.0)]
    assert s.infeasible == 1 and summarize(study_of(*trials, objectives=2), TINY).pareto == []  # one objective: no front


def test_a_schedule_twice_on_the_front_is_shown_by_its_first_trial():
    """A search run of uniform at the study seed, slower but lower in loss than the baseline run: both are on the
    front, and uniform's point is the baseline's."""
    config = with_search(TINY, objectives=["val_loss", "tokens_per_s"])
    trials = [run(UNIFORM, 0, [2.05, 1000.0], "baseline"), run("4x3", 0, [2.00, 900.0]), run(UNIFORM, 0, [2.04, 950.0])]
    s = summarize(study_of(*trials, objectives=2), config)
    assert [(p.number, p.schedule) for p in s.pareto] == [(1, "4x3"), (0, UNIFORM)]


def test_pairs_across_hardware_are_named_and_the_verdict_is_read_without_them_too():
    trials = []
    for seed, (u, a, b) in enumerate([(2.05, 2.04, 2.06), (2.08, 2.06, 2.09), (2.02, 2.01, 2.03)]):
        trials += [
            run(UNIFORM, seed, u, "baseline" if seed == 0 else "confirm", worker=AVX512),
            run("4x3", seed, a, "search" if seed == 0 else "confirm", worker=AVX512),
            run("2x3", seed, b, "search" if seed == 0 else "confirm", worker=AVX512),
        ]
    s = summarize(study_of(*trials), TINY)
    assert s.crossed_pairs == [] and s.verdict_one_kind is None and summary_json(s)["verdict_one_kind"] is None
    assert s.kernels == ["cpu AVX512"] and s.mixed_seeds == []
    trials += [run(UNIFORM, 3, 2.00, "confirm", worker=AVX512), run("4x3", 3, 1.90, "confirm", worker=AVX2)]
    trials += [run("2x3", 3, 2.01, "confirm", worker=AVX512)]
    s = summarize(study_of(*trials), TINY)
    assert s.crossed_pairs == [("4x3", 3)] and s.mixed_seeds == [3] and s.kernels == ["cpu AVX2", "cpu AVX512"]
    without = s.verdict_one_kind
    exact = summarize(study_of(*trials[:-3], trials[-3], trials[-1]), TINY).verdict  # the same study without the pair
    assert without == exact and without.effect != s.verdict.effect
    said = summary_json(s)
    assert said["verdict_one_kind"] == verdict_json(without, "known") and said["verdict"] == verdict_json(s.verdict, "known")
    one_pair = [
        run(UNIFORM, 0, 2.05, "baseline", worker=AVX512),
        run("4x3", 0, 2.00, worker=AVX512),
        run(UNIFORM, 1, 2.06, "confirm", worker=AVX512),
    ]
    crossed = summarize(study_of(*one_pair, run("4x3", 1, 1.90, "confirm", worker=AVX2)), TINY)
    undecided = summarize(study_of(*one_pair), TINY).verdict  # without the crossed pair: one pair, undecided
    assert crossed.verdict_one_kind == undecided and undecided.kind == "undecided" and undecided.next is not None


def test_only_the_baseline_run_stands_for_uniform_s_hardware_at_the_study_seed():
    """A search run of the uniform schedule at the study seed on other kernels does not make uniform's kind there."""
    trials = [run(UNIFORM, 0, 2.05, "baseline", worker=AVX512), run("4x3", 0, 2.00, worker=AVX512), run(UNIFORM, 0, 2.07, worker=AVX2)]
    s = summarize(study_of(*trials), TINY)
    assert s.crossed_pairs == [] and s.mixed_seeds == [0]  # the seed did see two kinds
    trials.append(run("2x3", 0, 2.01, worker=AVX2))
    assert summarize(study_of(*trials), TINY).crossed_pairs == [("2x3", 0)]
    no_kernels = [run(UNIFORM, 0, 2.05, "baseline", worker={"pid": 1}), run("4x3", 0, 2.00, worker=AVX2)]
    s = summarize(study_of(*no_kernels), TINY)
    assert s.crossed_pairs == [] and s.kernels == ["cpu AVX2"]  # a run from before kernels were recorded crosses nothing


def test_an_experiment_reads_its_pre_registered_schedule_at_its_looks_only():
    config = TINY.model_copy(update={"experiment": ExperimentSection(schedule="4x3", looks=[3])})
    trials = []
    for seed, (u, a) in enumerate([(2.05, 2.04), (2.08, 2.06), (2.02, 2.01)]):
        trials += [run(UNIFORM, seed, u, "baseline"), run("4x3", seed, a)]
    trials += [*confirmed("2x3", [1.0, 1.0, 1.0]), *confirmed("4x3", [1.1, 1.1, 1.1])]  # `confirm` on it: its own table
    s = summarize(study_of(*trials), config)
    assert s.is_experiment and s.plan.schedule == "4x3" and [look.pairs for look in s.looks] == [3]
    assert s.best_schedule == "4x3" and s.gaps == [] and s.deciding is None and s.runner_up is None
    assert s.verdict.method == s.plan and s.verdict.kind == s.looks[-1].outcome
    assert s.best_gap.selected_from is None and s.best_gap.all_seeds.n == 3 and s.best_gap.all_seeds.mean == pytest.approx(-0.04 / 3)
    assert s.best_seeds == (0, 1, 2) and s.best_value == pytest.approx((2.04 + 2.06 + 2.01) / 3)  # no confirm run
    assert [r.schedule for r in s.confirmation] == ["2x3", "4x3"]
    worse = study_of(run(UNIFORM, 0, 2.00, "baseline"), run("4x3", 0, 2.10))
    assert summarize(worse, config).best_schedule == "4x3" and not summarize(worse, config).uniform_is_best  # whichever way it leans
    s = summarize(study_of(), config)  # nothing trained yet: its schedule is named, with no trial
    assert (s.best_schedule, s.best_number, s.best_value, s.verdict.kind) == ("4x3", None, None, "undecided")


def test_an_experiment_s_pair_across_hardware_is_read_without_it_too():
    config = TINY.model_copy(update={"experiment": ExperimentSection(schedule="4x3", looks=[3])})
    trials = []
    for seed, (u, a) in enumerate([(2.05, 2.04), (2.08, 2.06), (2.02, 2.01)]):
        trials += [run(UNIFORM, seed, u, "baseline", worker=AVX512), run("4x3", seed, a, worker=AVX2 if seed == 2 else AVX512)]
    s = summarize(study_of(*trials), config)
    assert s.crossed_pairs == [("4x3", 2)] and s.verdict_one_kind.method == s.plan
    assert s.verdict_one_kind.seeds == (0, 1) and s.verdict.kind == s.looks[-1].outcome


def curved(schedule: str, seed: int, final: float, curve: dict) -> FrozenTrial:
    return run(schedule, seed, final, reported=curve)


def test_rung_fidelity_and_the_auto_pruning_start_come_from_the_study_s_own_curves():
    """At 100 tokens the ranks agree with the finals; at 200 they are reversed; a run short of 300 is left out."""
    trials = [run(UNIFORM, 0, 2.45, "baseline")]
    trials += [curved(f"s{k}", 0, f, {100: f + 1, 200: 9 - f, 300: f}) for k, f in enumerate([2.0, 2.1, 2.2, 2.3, 2.4, 2.5])]
    trials.append(curved("short", 0, 2.6, {100: 3.0}))
    config = with_search(TINY, min_resource_evals="auto")
    s = summarize(study_of(*trials), config)
    early, late = s.fidelity
    assert (early.tokens, early.agreement.n, early.best_kept, early.reduction_factor, early.best) == (100, 6, True, 3, "s0")
    assert early.agreement.rho == pytest.approx(1.0) and early.agreement.p == pytest.approx(1 / 720)
    assert (late.tokens, late.best_kept) == (200, False) and late.agreement.rho == pytest.approx(-1.0)
    assert s.pruning_from.rung is None and s.pruning_from.n_curves == 6  # the last rung does not rank reliably
    assert auto_pruning_start(trials, config) is None
    assert summarize(study_of(*trials), TINY).pruning_from is None  # not "auto": no pruning start to find
    full = TINY.train.steps * TINY.train.batch_size * TINY.model.block_size
    agreeing = [curved(f"s{k}", 0, f, {100: f + 1, 200: f + 2, 300: f}) for k, f in enumerate([2.0, 2.1, 2.2, 2.3, 2.4, 2.5])]
    s = summarize(study_of(*agreeing), config)
    assert s.pruning_from.rung.tokens == 100 and s.pruning_from.n_curves == 6 and s.pruning_from.budget_tokens == full
    assert s.pruning_from.reduction_factor == 3 and auto_pruning_start(agreeing, config) == 100
    assert summarize(study_of(*agreeing), with_search(config, pruner="none")).pruning_from is None


def test_a_rung_that_would_cut_the_best_schedule_is_no_pruning_start():
    """At 100 tokens the ranks agree well overall, but the best by mean ranks 4th of 10 there, below the kept third:
    pruning from 100 would drop it, so the start is 200, where every run is ranked as at the end."""
    config = with_search(TINY, min_resource_evals="auto")
    finals = [2.00, 2.05, 2.10, 2.15, 2.20, 2.25, 2.30, 2.35, 2.40]
    at_100 = [3.3, 3.0, 3.1, 3.2, 3.4, 3.5, 3.6, 3.7, 3.8]  # s0 4th
    trials = [run(UNIFORM, 0, 2.45, "baseline", reported={100: 3.9, 200: 2.95, 300: 2.45})]
    trials += [curved(f"s{k}", 0, f, {100: e, 200: f + 0.5, 300: f}) for k, (f, e) in enumerate(zip(finals, at_100, strict=True))]
    assert auto_pruning_start(trials, config) == 200 and summarize(study_of(*trials), config).pruning_from.rung.tokens == 200
    # uniform best (every other schedule worse), 5th of 13 at 100 tokens where 4 are kept: the same cut, of uniform
    finals = [*finals, 2.45, 2.50, 2.55]
    at_100 = [2.95, *at_100[1:], 3.9, 4.0, 4.1]
    uniform_best = [run(UNIFORM, 0, 1.95, "baseline", reported={100: 3.25, 200: 2.45, 300: 1.95})]
    uniform_best += [curved(f"s{k}", 0, f, {100: e, 200: f + 0.5, 300: f}) for k, (f, e) in enumerate(zip(finals, at_100, strict=True))]
    assert summarize(study_of(*uniform_best), config).uniform_is_best and auto_pruning_start(uniform_best, config) == 200


def test_full_curves_are_the_trained_runs_that_reach_the_longest_budget():
    trials = [
        curved("a", 0, 2.0, {100: 2.5, 300: 2.0}),
        run("b", 1, 2.1, **{CURVE: [[100, 2.6], [300, 2.1]]}),  # the curve as an attr: the same
        curved("c", 0, 2.2, {100: 2.7}),  # short of 300
        run("a", 0, 2.0, reported={100: 2.5, 300: 2.0}, **{DUPLICATE_ATTR: 0}),  # served by the cache: trained nothing
        curved("d", 0, math.inf, {100: 2.5, 300: 2.0}),  # no final loss
        run("e", None, 2.0, reported={100: 2.5, 300: 2.0}),  # no seed
        run(None, 2, 2.3, reported={100: 2.9, 300: 2.3}),  # no schedule attr
        run("f", 3, 2.0),  # no curve at all
    ]
    curves = full_curves(trials)
    assert [(c.schedule, c.seed, c.final) for c in curves] == [("a", 0, 2.0), ("b", 1, 2.1), ("", 2, 2.3)]
    assert curves[1].points == {100: 2.6, 300: 2.1} and curves[0].points == {100: 2.5, 300: 2.0}
    assert full_curves([]) == ()


def test_unsaved_models_and_unreadable_trials_are_named():
    trials = [*searched(), run("2x6", 0, 2.2, **{ATTR_CHECKPOINT_ERROR: "disk full"}), run("3x3", "zero", 2.2)]
    s = summarize(study_of(*trials), TINY)
    assert s.unsaved == [Unsaved(5, "disk full")] and list(s.left_out) == [6] and "seed" in s.left_out[6]
    assert s.counts == {"COMPLETE": 6}  # the unreadable trial is counted nowhere


def test_running_trials_in_memory_have_no_driver_to_lose():
    s = summarize(study_of(*searched(), run("2x6", 0, None, state=TrialState.RUNNING)), TINY)
    assert s.driver_gone is None and s.counts == {"COMPLETE": 5, "RUNNING": 1}


def _sqlite_study(tmp_path, heartbeat: int | None, *trials: FrozenTrial) -> optuna.Study:
    storage = optuna.storages.RDBStorage(
        f"sqlite:///{tmp_path / 'study.db'}", heartbeat_interval=heartbeat, grace_period=60 if heartbeat else None
    )
    study = optuna.create_study(study_name="known", storage=storage)
    study.add_trials(trials)
    return study


def _started_long_ago() -> FrozenTrial:
    t = run("2x6", 0, None, state=TrialState.RUNNING)
    t.datetime_start = t.datetime_start.replace(year=t.datetime_start.year - 1)
    return t


def test_a_driver_lock_naming_an_ended_process_says_the_driver_is_gone(tmp_path):
    ended = subprocess.Popen(["true"])
    ended.wait()
    study = _sqlite_study(tmp_path, None, *searched(), run("2x6", 0, None, state=TrialState.RUNNING))
    assert summarize(study, TINY).driver_gone is None  # no lock file and no heartbeats: nothing tells
    (tmp_path / "study.db.driver.lock").write_text(f"pid {ended.pid}")
    assert summarize(study, TINY).driver_gone == DriverGone([5], ended.pid)


def test_running_trials_whose_heartbeat_stopped_are_the_ones_named(tmp_path):
    study = _sqlite_study(tmp_path, 30, *searched(), run("3x3", 0, None, state=TrialState.RUNNING))
    assert summarize(study, TINY).driver_gone is None  # a fresh trial may still be starting
    study.add_trial(_started_long_ago())
    assert summarize(study, TINY).driver_gone == DriverGone([6], None)
