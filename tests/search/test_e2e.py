"""End to end on real parts: a local Ray cluster, SQLite files, real torch training of tiny models."""

import hashlib
import json
import os
import signal
import subprocess
import sys

import optuna
import pytest
from optuna.trial import TrialState

from prism import Schedule
from search.analysis.budget import budget
from search.analysis.summary import summarize
from search.runner.driver import Driver
from search.runner.preflight import check_corpus
from search.storage import open_storage
from search.storage.records import FINISHED
from search.study.create import open_study
from search.study.pruning import make_stopping

pytestmark = pytest.mark.e2e


def test_tiny_study_runs_prunes_and_is_plain_optuna(ray_local, tiny_config):
    config = tiny_config.model_copy(update={"n_trials": 6})
    fingerprint = check_corpus(config)
    ctx = open_study(config, open_storage(config.storage), fingerprint)
    Driver(ctx, stopping=make_stopping(ctx)).run(config.n_trials, n_workers=2)

    stock = optuna.load_study(study_name="tiny", storage=config.storage)  # the stock library reads it
    trials = stock.get_trials()
    states = [t.state for t in trials]
    assert budget(trials, search_seed=0).trained == 6 and TrialState.RUNNING not in states  # served duplicates on top
    assert TrialState.PRUNED in states, "the successive-halving pruner should stop at least one weak trial"
    assert [t.user_attrs["role"] for t in trials[:2]] == ["baseline", "baseline"]
    assert [t.user_attrs["seed"] for t in trials[:2]] == [0, 1]
    assert stock.user_attrs["prism.corpus_fingerprint"] == fingerprint
    for t in trials:
        schedule = Schedule.parse(t.user_attrs["schedule"])
        assert schedule.is_monotone
        assert [t.user_attrs[f"heads_{i:02d}"] for i in range(3)] == list(schedule.heads)
        assert t.user_attrs["tokens_per_s"] > 0 and t.user_attrs["curve"]
        assert t.intermediate_values  # what the pruner read
    pruned = [t for t in trials if t.state == TrialState.PRUNED]
    assert all(t.user_attrs["pruned_at_tokens"] < 60 * 8 * 32 for t in pruned)
    summary = summarize(stock)
    assert summary.baseline_value is not None and summary.uniform_noise_floor is not None and summary.best_gap.all_seeds is not None


@pytest.mark.parametrize(
    "lr, grad_clip, reason",
    [
        (10.0, 1e6, "TrainingDiverged"),  # the largest lr and clip the bounds table allows: diverges, however it shows
        (10.0, 1.0, "is above 4.0 x ln(vocab_size=256)"),  # clipped: finite losses of hundreds of nats
    ],
    ids=["unclipped", "finite-but-absurd"],
)
def test_failed_trials_are_recorded_with_their_error(ray_local, tiny_config, lr, grad_clip, reason):
    # lr so large that training diverges for real: every trial must end FAIL with the reason stored, never COMPLETE
    config = tiny_config.model_copy(update={"n_trials": 2})
    config = config.model_copy(
        update={
            "train": config.train.model_copy(update={"lr": lr, "grad_clip": grad_clip}),
            "search": config.search.model_copy(update={"max_failed_trials": 1}),
        }
    )
    fingerprint = check_corpus(config)
    ctx = open_study(config, open_storage(config.storage), fingerprint)
    study = ctx.study
    with pytest.raises(Exception, match="trials failed"):
        Driver(ctx, stopping=make_stopping(ctx)).run(config.n_trials, n_workers=1)
    failed = study.get_trials(states=(TrialState.FAIL,))
    assert len(failed) == 2 and all("TrainingDiverged" in t.user_attrs["error"] and reason in t.user_attrs["error"] for t in failed)
    assert not study.get_trials(states=(TrialState.COMPLETE,))


def _cli(*args, **kw):
    return subprocess.Popen([sys.executable, "-m", "search.cli", *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)


@pytest.mark.long
def test_interrupted_run_resumes_to_exactly_n_trials(tmp_path, study_toml):
    """Ctrl-C; SIGTERM (what kill, systemd, Kubernetes and `ray job stop` send) stops a run the same way, which the
    rounds' test (tests/search/study/test_rounds_e2e.py) sends with the same checks."""
    sig = signal.SIGINT
    toml = study_toml(("n_trials = 5", "n_trials = 6"))
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    proc = _cli("run", str(toml), "--storage", url)
    lines = []
    for line in proc.stdout:  # wait until two trials have finished, then interrupt
        lines.append(line)
        if sum("COMPLETE" in l or "PRUNED" in l for l in lines) >= 2:
            proc.send_signal(sig)
            break
    out = "".join(lines) + proc.communicate(timeout=120)[0]
    assert proc.returncode == 130, out
    assert f"prism-search resume tiny --storage {url}" in out
    assert "Traceback" not in out and "SIGTERM received" not in out, out  # no crash banner

    study = optuna.load_study(study_name="tiny", storage=url)
    assert not study.get_trials(states=(TrialState.RUNNING,))
    interrupted = [t for t in study.trials if t.state == TrialState.FAIL]
    errors = {t.number: t.user_attrs.get("error") for t in interrupted}
    assert errors and all("interrupted" in (e or "") for e in errors.values()), (errors, out)
    waiting = [t.user_attrs["schedule"] for t in study.trials if t.state == TrialState.WAITING]
    # queued again: every interrupted trial (its schedule is stored in the step that asked for it) but a served
    # copy, whose original (queued again too, or finished) has its schedule
    assert sorted(waiting) == sorted(
        t.user_attrs["schedule"] for t in interrupted if "schedule" in t.user_attrs and "duplicate_of" not in t.user_attrs
    )

    proc = _cli("resume", "tiny", "--storage", url)
    out = proc.communicate(timeout=300)[0]
    assert proc.returncode == 0, out
    study = optuna.load_study(study_name="tiny", storage=url)
    assert budget(study.get_trials(), search_seed=0).trained == 6
    assert not study.get_trials(states=(TrialState.RUNNING, TrialState.WAITING))
    assert "gap to uniform" in out

    status = subprocess.run(
        [sys.executable, "-m", "search.cli", "status", "tiny", "--storage", url, "--json"], capture_output=True, text=True, check=True
    )
    summary = json.loads(status.stdout)
    assert summary["trained"] == 6  # COMPLETE and PRUNED ones may hold served duplicates on top
    assert summary["best_schedule"] and summary["best_gap"]["all_seeds"]["n"] >= 1


def _sha(path):
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else None


@pytest.mark.parametrize(
    "edit, fragment",
    [
        (("[model]", "[model]\nwidth = 3"), "model.width: unknown field"),
        (("dh_min = 16", "dh_min = 24"), "model.dh_min: 24 is not a power of two"),
        (("[train]", "[space]\nbaseline_heads = 3\n\n[train]"), "space.baseline_heads=3"),
        (("d_model = 64", "d_model = 0"), "model.d_model: Input should be greater than 0"),
        (("steps = 60", "steps = -5"), "train.steps: Input should be greater than 0"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path, study_toml, edit, fragment):
    db = tmp_path / "keep.db"
    optuna.create_study(study_name="existing", storage=f"sqlite:///{db}").optimize(lambda t: 1.0, n_trials=1)
    before = _sha(db)
    result = subprocess.run(
        [sys.executable, "-m", "search.cli", "run", str(study_toml(edit)), "--storage", f"sqlite:///{db}"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert result.stdout == "" and result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert fragment in result.stderr
    assert _sha(db) == before


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["run", "studies/missing.toml"], "study config 'studies/missing.toml' not found"),
        (["run", "studies/tiny.toml", "--storage", "postgresql+psycopg://postgres@127.0.0.1:1/x"], "is unreachable"),
        (["run", "studies/tiny.toml", "--storage", "sqlite:////nonexistent/dir/x.db"], "does not exist"),
        (["status", "nope", "--storage", "sqlite:///{db}"], "no study named 'nope'"),
    ],
)
def test_missing_file_unreachable_storage_and_unknown_study(tmp_path, args, fragment):
    from tests.search.conftest import ROOT

    db = tmp_path / "keep.db"
    optuna.create_study(study_name="existing", storage=f"sqlite:///{db}")
    before = _sha(db)
    args = [a.replace("{db}", str(db)) for a in args]
    result = subprocess.run([sys.executable, "-m", "search.cli", *args], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert result.returncode == 2, result.stderr
    assert fragment in result.stderr and result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert _sha(db) == before


def test_four_workers_start_four_distinct_schedules(tmp_path, study_toml):
    """The first wave of a 4-worker run trains 4 distinct schedules, none served from the cache. Seed 0 is the seed
    whose unguarded first draws repeat a schedule (search.study.samplers.DistinctSampler)."""
    toml = study_toml(("baseline_seeds = 2", "baseline_seeds = 1"), ("steps = 60", "steps = 20"), ("eval_every = 20", "eval_every = 10"))
    url = f"sqlite:///{tmp_path / 'wave.db'}"
    # a 2-core machine admits 2 local workers (preflight: workers x cpus_per_trial <= cores); 4 concurrent asks are
    # tested in process in test_samplers (test_concurrent_proposals_are_distinct_until_the_space_runs_short)
    proc = _cli("run", str(toml), "--storage", url, "--workers", str(min(4, os.cpu_count() or 1)), "--n-trials", "5")
    out = proc.communicate(timeout=300)[0]
    assert proc.returncode == 0, out
    assert "(= trial" not in out, out  # no proposal was a running or trained schedule
    trials = optuna.load_study(study_name="tiny", storage=url).trials
    first_wave = [t.user_attrs["schedule"] for t in trials[:4]]
    assert len(set(first_wave)) == 4, first_wave
    assert len(trials) == 5 and all(t.state in FINISHED and "duplicate_of" not in t.user_attrs for t in trials), [t.state for t in trials]


def test_racing_study_is_interrupted_resumes_and_ends_with_every_race_run_stored(tmp_path, study_toml):
    """Racing on tiny's 10-schedule space, max 3 seeds, a margin wide enough that challengers are raced: Ctrl-C
    (a real SIGINT) once race runs are under way, then `resume` to the end. Every race run is an ordinary stored
    trial with role race and its seed, read back with the stock library."""
    toml = study_toml(
        ("n_trials = 5", "n_trials = 9"),
        ('pruner = "successive-halving"', 'pruner = "none"\nracing = true\nmax_seeds = 3\nmargin = 0.2'),
        ("steps = 60", "steps = 20"),
        ("eval_every = 20", "eval_every = 10"),
    )
    url = f"sqlite:///{tmp_path / 'race.db'}"
    proc = _cli("run", str(toml), "--storage", url)
    lines = []
    for line in proc.stdout:  # interrupt once a race run has started
        lines.append(line)
        if "(race, seed " in line:  # a race run says its seed
            proc.send_signal(signal.SIGINT)
            break
    out = "".join(lines) + proc.communicate(timeout=120)[0]
    assert proc.returncode == 130, out
    assert "racing: queued" in out, out
    proc = _cli("resume", "tiny", "--storage", url)
    out = proc.communicate(timeout=600)[0]
    assert proc.returncode == 0, out

    study = optuna.load_study(study_name="tiny", storage=url)
    trials = study.get_trials()
    assert budget(trials, search_seed=0).trained == 9
    assert not study.get_trials(states=(TrialState.RUNNING, TrialState.WAITING))
    race = [t for t in trials if t.user_attrs.get("role") == "race"]
    assert race, [t.user_attrs.get("role") for t in trials]
    assert all(t.user_attrs["seed"] in (1, 2) and Schedule.parse(t.user_attrs["schedule"]) for t in race)
    assert any(t.state == TrialState.FAIL and "interrupted" in t.user_attrs["error"] for t in trials)  # the kill landed
    finished = {(t.user_attrs["schedule"], t.user_attrs["seed"]) for t in trials if t.state in FINISHED}
    assert {(t.user_attrs["schedule"], t.user_attrs["seed"]) for t in race} <= finished  # interrupted ones ran again
    first_seed = {t.user_attrs["schedule"] for t in trials if t.state in FINISHED and t.user_attrs["seed"] == 0}
    assert {t.user_attrs["schedule"] for t in race} <= first_seed  # raced: schedules that ran at the search seed


@pytest.mark.long
def test_experiment_trains_pairs_together_is_interrupted_resumes_and_ends_at_a_look(tmp_path, study_toml):
    """A pre-registered experiment on tiny (looks at 3 and 4 pairs): Ctrl-C (a real SIGINT) while a pair trains,
    `resume` to the end. Only the pairs run, both runs of a pair at once and the next pair after both finished; the
    study ends at a look with a verdict naming its seeds, and a further `resume` trains nothing."""
    toml = study_toml(
        ("seed = 0", "seed = 2000"),
        ("n_trials = 5", "n_trials = 8"),
        ('pruner = "successive-halving"\nn_startup_trials = 2\nbaseline_seeds = 2', 'pruner = "none"\nbaseline_seeds = 1'),
        ("steps = 60", "steps = 20"),
        ("eval_every = 20", "eval_every = 10"),
    )
    toml.write_text(toml.read_text() + '\n[experiment]\nschedule = "1x1,2x1,4x1"\nlooks = [3, 4]\n')
    url = f"sqlite:///{tmp_path / 'experiment.db'}"
    proc = _cli("run", str(toml), "--storage", url)
    lines = []
    for line in proc.stdout:  # interrupt while the second pair trains
        lines.append(line)
        if "started: 1x1,2x1,4x1 (race, seed" in line and "1 of 3 pairs" in "".join(lines):
            proc.send_signal(signal.SIGINT)
            break
    out = "".join(lines) + proc.communicate(timeout=120)[0]
    assert proc.returncode == 130, out
    proc = _cli("resume", "tiny", "--storage", url)
    out = proc.communicate(timeout=600)[0]
    assert proc.returncode == 0, out

    trials = optuna.load_study(study_name="tiny", storage=url).get_trials()
    assert any(t.state == TrialState.FAIL and "interrupted" in t.user_attrs["error"] for t in trials)  # the kill landed
    done = sorted((t for t in trials if t.state == TrialState.COMPLETE), key=lambda t: t.datetime_start)
    assert {t.user_attrs["schedule"] for t in done} == {"1x3", "1x1,2x1,4x1"}
    assert all(t.user_attrs["role"] in ("baseline", "race") for t in done)
    pairs: dict[int, list] = {}
    for t in done:
        pairs.setdefault(t.user_attrs["seed"], []).append(t)
    assert sorted(pairs) == list(range(2000, 2000 + len(pairs))) and len(pairs) in (3, 4)  # it stopped at a look
    assert all(sorted(t.user_attrs["schedule"] for t in pair) == ["1x1,2x1,4x1", "1x3"] for pair in pairs.values())
    for seed in sorted(pairs)[1:]:  # a pair starts after the one before it has finished, its two runs together
        before, pair = pairs[seed - 1], pairs[seed]
        assert min(t.datetime_start for t in pair) >= max(t.datetime_complete for t in before)
        assert abs((pair[0].datetime_start - pair[1].datetime_start).total_seconds()) < 10
    summary = json.loads(
        subprocess.run(
            [sys.executable, "-m", "search.cli", "status", "tiny", "--storage", url, "--json"], capture_output=True, text=True, check=True
        ).stdout
    )
    assert summary["verdict"]["kind"] in ("better", "worse", "equivalent", "undecided")
    assert summary["verdict"]["seeds"] and set(summary["verdict"]["seeds"]) <= set(pairs)
    assert summary["looks"] and "pre-registered" in summary["verdict"]["method"]
    again = _cli("resume", "tiny", "--storage", url).communicate(timeout=120)[0]
    assert "has ended" in again and "nothing to run" in again, again
