"""Crashes for real: a SIGKILLed driver, a killed worker, a database that goes away, two drivers on one study; and
what a driver killed at a chosen moment leaves in the database, written with the calls it makes, then resumed."""

import contextlib
import io
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState
from rich.console import Console

from prism import Schedule
from search.analysis.budget import budget
from search.attrs import DUPLICATE_ATTR, ROLE_SEARCH
from search.cli.progress import Progress
from search.errors import DatabaseUnavailable
from search.runner import driver as driver_module
from search.runner.driver import Driver
from search.runner.preflight import check_corpus
from search.runner.undelivered import deliver_undelivered, undelivered_path
from search.storage import database, open_storage, stale_trial_ids, storage_of, trial_id
from search.storage.records import FINISHED, enqueue, schedule_attrs
from search.study import Study
from search.study.confirmation import plan_confirmation
from search.study.create import open_study
from search.study.pruning import make_stopping
from tests.search.conftest import ROOT
from tests.search.pg import fresh_database

pytestmark = pytest.mark.e2e

FAST_HEARTBEAT = {"PRISM_SEARCH_HEARTBEAT_S": "1", "PRISM_SEARCH_GRACE_S": "3"}


def _start(*args, log, **env):
    """Start `prism-search ARGS` in its own process group (so its local Ray can be cleaned up with it)."""
    return subprocess.Popen(
        [sys.executable, "-m", "search.cli", *args],
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, **FAST_HEARTBEAT, **env},
        start_new_session=True,
        cwd=ROOT,
    )


def _kill_group(proc):
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


def _finished(url, name="tiny"):
    study = optuna.load_study(study_name=name, storage=url)
    return {t.number: (t.state, t.value) for t in study.get_trials(states=FINISHED)}


def _wait_for_study(url, name="tiny", timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            return optuna.load_study(study_name=name, storage=url)
        except Exception:  # no file, no tables or no study yet
            time.sleep(0.3)
    raise AssertionError(f"study {name} never appeared in {url}")


def _assert_complete(url, n_trials, name="tiny"):
    study = optuna.load_study(study_name=name, storage=url)
    assert budget(study.get_trials(), search_seed=0).trained == n_trials  # served duplicates come on top
    assert not study.get_trials(states=(TrialState.RUNNING, TrialState.WAITING))
    return study


@pytest.mark.long
def test_driver_sigkill_at_a_random_moment_then_resume(tmp_path, study_toml):
    url = f"sqlite:///{tmp_path / 'kill.db'}"
    delay = random.uniform(0.0, 25.0)
    print(f"killing the driver {delay:.1f} s after its study appeared")  # shown on failure, to reproduce
    with open(tmp_path / "run.log", "w") as log:
        proc = _start("run", str(study_toml(("n_trials = 5", "n_trials = 6"))), "--storage", url, log=log)
        _wait_for_study(url)
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        _kill_group(proc)  # the local Ray it started dies with its machine, as it would in a real crash
    before = _finished(url)

    with open(tmp_path / "resume.log", "w") as log:
        resume = _start("resume", "tiny", "--storage", url, log=log)
        assert resume.wait(timeout=400) == 0, (tmp_path / "resume.log").read_text()
        _kill_group(resume)
    study = _assert_complete(url, 6)
    after = _finished(url)
    assert {n: after[n] for n in before} == before  # nothing finished was lost or changed
    for lost in [t for t in study.trials if "driver lost" in t.user_attrs.get("error", "")]:
        retries = [t for t in study.trials if t.user_attrs.get("retry_of") == lost.number]
        if "schedule" not in lost.user_attrs or "duplicate_of" in lost.user_attrs:
            assert not retries  # none drawn yet, or a served copy: its original (or that one's retry) trains it
        else:
            assert len(retries) == 1 and retries[0].user_attrs["schedule"] == lost.user_attrs["schedule"]


@pytest.fixture
def fast_heartbeat(monkeypatch):
    """FAST_HEARTBEAT for the storages this process opens: a lost driver's trials go stale in seconds."""
    for variable, value in FAST_HEARTBEAT.items():
        monkeypatch.setenv(variable, value)
    return database.heartbeat_seconds()[1]


def _one_worker_study(tiny_config, n_trials):
    """The tiny study with one baseline seed and one worker, created and queued as `run` creates it: its context."""
    config = tiny_config.model_copy(update={"n_trials": n_trials})
    config = config.model_copy(
        update={
            "search": config.search.model_copy(update={"baseline_seeds": 1}),
            "resources": config.resources.model_copy(update={"workers": 1}),
        }
    )
    return open_study(config, open_storage(config.storage), check_corpus(config))


def _resume(config, out=None):
    """`resume` as the CLI runs it: the stored study read once, then driven with the config it was created with."""
    Study.load(config.name, storage=config.storage).resume(progress=Progress(console=Console(file=out or io.StringIO())))


def _taken_by_a_driver_that_dies(study, duplicate_of=None):
    """What a driver writes when it takes its next trial (Driver._dispatch: ask, heartbeat; a served copy is
    marked as one) before it is killed: the trial stays RUNNING with its last heartbeat."""
    trial = study.ask()
    storage_of(study).record_heartbeat(trial_id(trial))
    if duplicate_of is not None:
        trial.set_user_attr(DUPLICATE_ATTR, duplicate_of.number)
    return trial


def _retries(study):
    return {t.user_attrs["retry_of"]: t for t in study.trials if "retry_of" in t.user_attrs}


def test_resume_runs_again_a_lost_trial_but_not_its_lost_served_copy(ray_local, tiny_config, fast_heartbeat):
    """The dead driver held the baseline and a trial of the same schedule waiting for its result. Only the
    baseline is queued again: the copy trained nothing, queued again it could only be served, and once the study
    reached its target (here the baseline's retry fills it) it would be left waiting for ever."""
    ctx = _one_worker_study(tiny_config, n_trials=1)
    config, study = ctx.config, ctx.study
    original = _taken_by_a_driver_that_dies(study)  # the baseline, queued at creation
    enqueue(study, config.family, config.baseline, role=ROLE_SEARCH, seed=config.seed)
    copy = _taken_by_a_driver_that_dies(study, duplicate_of=original)
    time.sleep(fast_heartbeat + 1.1)  # SQLite keeps whole seconds: both heartbeats are now older than the grace
    _resume(config)
    study = _assert_complete(config.storage, 1)
    assert "driver lost" in study.trials[copy.number].user_attrs["error"]
    retries = _retries(study)
    assert list(retries) == [original.number] and retries[original.number].state == TrialState.COMPLETE


def test_resume_does_not_queue_again_its_copy_of_a_trial_lost_after_it_started(ray_local, tiny_config, fast_heartbeat):
    """At resume the dead driver's baseline is not stale yet: the resumed driver serves a queued trial of the same
    schedule from it (it waits), then recovers the baseline (queued again). The waiting copy fails with its
    original but is not queued again: the baseline's retry trains the schedule, and a second queued copy of it
    could be left waiting once the study is full (the flaky `kill at a random moment` failure)."""
    ctx = _one_worker_study(tiny_config, n_trials=2)
    config, study = ctx.config, ctx.study
    enqueue(study, config.family, config.baseline, role=ROLE_SEARCH, seed=config.seed)
    original = _taken_by_a_driver_that_dies(study)
    _resume(config)
    study = _assert_complete(config.storage, 2)
    copy = study.trials[original.number + 1]
    assert copy.user_attrs[DUPLICATE_ATTR] == original.number and copy.state == TrialState.FAIL  # it waited, then failed
    retries = _retries(study)
    assert copy.number not in retries and retries[original.number].state == TrialState.COMPLETE


def test_resume_fails_a_trial_lost_before_its_schedule_was_drawn_and_queues_nothing(tiny_config, fast_heartbeat):
    """A driver killed between asking the sampler and storing the schedule leaves a RUNNING trial without one:
    resume fails it and has nothing to queue again (it used to stop on a KeyError)."""
    ctx = _one_worker_study(tiny_config, n_trials=1)
    config, study = ctx.config, ctx.study
    study.tell(study.ask(), [3.0])  # the baseline, its result made up: the study has its one trained trial
    lost = _taken_by_a_driver_that_dies(study)  # the queue is empty: a sampler trial, no schedule drawn yet
    time.sleep(fast_heartbeat + 1.1)
    out = io.StringIO()
    _resume(config, out)
    assert "already has 1/1 trained trials; nothing to run" in out.getvalue()
    study = _assert_complete(config.storage, 1)
    assert study.trials[lost.number].state == TrialState.FAIL and "driver lost" in study.trials[lost.number].user_attrs["error"]


def test_a_trial_lost_before_its_first_heartbeat_goes_stale_too(tiny_config, fast_heartbeat):
    """A driver killed between `ask` and its first heartbeat leaves a RUNNING trial without one, which Optuna
    never calls stale: resume would have waited for it for ever. Once it is older than the grace it is lost."""
    ctx = _one_worker_study(tiny_config, n_trials=1)
    config, study = ctx.config, ctx.study
    study.tell(study.ask(), [3.0])  # the baseline, its result made up: the study has its one trained trial
    silent = study.ask()  # no heartbeat: the driver died right here
    beating = _taken_by_a_driver_that_dies(study)
    assert trial_id(silent) not in stale_trial_ids(study)  # not yet: it may be a live driver's, about to beat
    time.sleep(fast_heartbeat + 1.1)
    storage_of(study).record_heartbeat(trial_id(beating))  # a live driver's trial, beating: never stale
    assert stale_trial_ids(study) == [trial_id(silent)]
    _resume(config)
    assert study.trials[silent.number].state == TrialState.FAIL and "driver lost" in study.trials[silent.number].user_attrs["error"]


def test_confirm_after_a_lost_confirm_driver_trains_every_planned_run(ray_local, tiny_config, fast_heartbeat):
    """A `confirm` killed while training a run it planned, confirmed again before that run's heartbeat is stale:
    the lost run is recovered while the second `confirm` trains, and it trains too. Counting only the queue, the
    target was one short: the run's retry was left waiting and its seed missing from the confirmation."""
    ctx = _one_worker_study(tiny_config, n_trials=2)
    config, study = ctx.config, ctx.study
    study.tell(study.ask(), [3.0])  # a finished search, its results made up: the baseline queued at creation,
    best = study.ask()  # and one schedule better than it
    for key, value in schedule_attrs(Schedule.parse("1x1,2x1,4x1"), ROLE_SEARCH, config.seed).items():
        best.set_user_attr(key, value)
    study.tell(best, [2.5])
    assert plan_confirmation(ctx, top=1, seeds=1) == 2  # the first `confirm` queues uniform and the best at one fresh seed
    lost = _taken_by_a_driver_that_dies(study)
    rows = Study.load(config.name, storage=config.storage).confirm(1, 1, progress=Progress(console=Console(file=io.StringIO())))
    study = _assert_complete(config.storage, 4)
    runs = [t for t in study.get_trials(states=FINISHED) if t.user_attrs["role"] == "confirm"]
    assert sorted(t.user_attrs["schedule"] for t in runs) == sorted(["1x3", "1x1,2x1,4x1"])
    assert _retries(study)[lost.number] in runs and [r.seeds for r in rows] == [1, 1]


class _CtrlCInsideAsk(optuna.samplers.RandomSampler):
    """Presses Ctrl-C (a real SIGINT to this process) inside `ask`, after the database has made the trial RUNNING:
    where a Ctrl-C sent just after a trial finished lands when the driver asks for the next one."""

    def before_trial(self, study, trial):
        super().before_trial(study, trial)
        signal.raise_signal(signal.SIGINT)


def test_ctrl_c_inside_ask_leaves_no_trial_running(ray_local, tiny_config):
    """The interrupt takes effect once the driver knows the trial: failed as interrupted and queued again, not left
    RUNNING (which made the interrupted-run test flaky: `resume` found a RUNNING trial no driver owned)."""
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # Python's own Ctrl-C, as in the CLI
    ctx = _one_worker_study(tiny_config, n_trials=1)
    config, study = ctx.config, ctx.study
    study.sampler = _CtrlCInsideAsk(seed=0)
    with pytest.raises(KeyboardInterrupt):
        Driver(ctx, stopping=make_stopping(ctx)).run(1, n_workers=1)
    trials = study.get_trials()
    assert [t.state for t in trials] == [TrialState.FAIL, TrialState.WAITING]  # the baseline, then its copy in the queue
    assert "interrupted" in trials[0].user_attrs["error"]
    assert trials[1].user_attrs["schedule"] == str(config.baseline)


def test_ctrl_c_inside_the_samplers_ask_queues_the_proposed_schedule_again(ray_local, tiny_config):
    """A proposal interrupted before its schedule was stored could not be queued again, and the grid sampler counted
    its grid point as visited: that schedule never trained (the own-trainer test's stalled schedule went missing)."""
    ctx = _one_worker_study(tiny_config, n_trials=2)
    study = ctx.study
    study.tell(study.ask(), [3.0])  # the queued baseline, its result made up: the next trial is the sampler's
    study.sampler = _CtrlCInsideAsk(seed=0)
    with pytest.raises(KeyboardInterrupt):
        Driver(ctx, stopping=make_stopping(ctx)).run(2, n_workers=1)
    _, proposed, queued = study.get_trials()
    assert (proposed.state, queued.state) == (TrialState.FAIL, TrialState.WAITING)
    assert "interrupted" in proposed.user_attrs["error"] and queued.user_attrs["schedule"] == proposed.user_attrs["schedule"]


class _WorkerLostToAnInterrupt(Progress):
    """As the first trial starts, its worker dies and a real SIGTERM is swallowed by a finalizer: the worker's error
    reaches the driver before its next turn's interrupt check does."""

    def __init__(self):
        super().__init__(live=False)
        self.begin("tiny", target=1, done_before=0)
        self.driver: Driver | None = None

    def started_trial(self, number, schedule, role, seed, served=False):
        import ray

        from tests.search.test_signals import swallow_one_sigterm

        super().started_trial(number, schedule, role, seed, served)
        assert self.driver is not None
        (job,) = self.driver.in_flight.values()
        ray.kill(job.worker)
        with contextlib.suppress(ray.exceptions.RayActorError):  # wait until it is dead: its start is an error now
            ray.get(job.worker.__ray_ready__.remote())
        swallow_one_sigterm()


def test_a_run_an_interrupt_broke_is_interrupted_not_failed(ray_local, tiny_config):
    """An error that meets a pending interrupt is the interrupt's doing: the trial is queued again as interrupted,
    not failed as "worker died" and counted (the CLI's SIGTERM test once found such a trial)."""
    from search.signals import sigterm_as_ctrl_c

    ctx = _one_worker_study(tiny_config, n_trials=1)
    progress = _WorkerLostToAnInterrupt()
    driver = progress.driver = Driver(ctx, progress, stopping=make_stopping(ctx))
    with pytest.raises(KeyboardInterrupt), sigterm_as_ctrl_c():
        driver.run(1, n_workers=1)
    trials = ctx.study.get_trials()
    assert [t.state for t in trials] == [TrialState.FAIL, TrialState.WAITING]
    assert "interrupted" in trials[0].user_attrs["error"] and driver.failures == 0


def test_killed_worker_fails_its_trial_and_the_schedule_is_retried(tmp_path, study_toml):
    url = f"sqlite:///{tmp_path / 'worker.db'}"
    with open(tmp_path / "run.log", "w") as log:
        proc = _start("run", str(study_toml()), "--storage", url, log=log)
        victim = None
        study = _wait_for_study(url)
        deadline = time.monotonic() + 120
        while victim is None and time.monotonic() < deadline:
            time.sleep(0.5)
            for t in study.get_trials(states=(TrialState.RUNNING,)):
                if "worker" in t.user_attrs and t.intermediate_values:
                    victim = t
                    os.kill(t.user_attrs["worker"]["pid"], signal.SIGKILL)
                    break
        assert victim is not None, "no trial ever ran long enough to be killed"
        assert proc.wait(timeout=300) == 0, (tmp_path / "run.log").read_text()
        _kill_group(proc)
    study = _assert_complete(url, 5)
    killed = study.trials[victim.number]
    assert killed.state == TrialState.FAIL and "worker died" in killed.user_attrs["error"]
    retry = [t for t in study.trials if t.user_attrs.get("retry_of") == victim.number]
    assert len(retry) == 1 and retry[0].user_attrs["attempt"] == 1
    assert retry[0].user_attrs["schedule"] == victim.user_attrs["schedule"] and retry[0].state in FINISHED


def test_two_drivers_share_one_postgres_study(tmp_path, study_toml):
    toml = study_toml(("n_trials = 5", "n_trials = 7"))
    with fresh_database() as url, contextlib.ExitStack() as files:
        logs = [files.enter_context(open(tmp_path / f"driver{i}.log", "w")) for i in range(2)]
        procs = [_start("run", str(toml), "--storage", url, "--workers", "1", log=log) for log in logs]
        for proc, log in zip(procs, logs):
            assert proc.wait(timeout=400) == 0, Path(log.name).read_text()
            _kill_group(proc)
        study = _assert_complete(url, 7)
        baselines = [t for t in study.trials if t.user_attrs.get("role") == "baseline" and "retry_of" not in t.user_attrs]
        assert len(baselines) == 2  # the study was created, and its baselines enqueued, once
        owners = {t.user_attrs["worker"]["pid"] for t in study.get_trials(states=FINISHED) if "worker" in t.user_attrs}
        assert len(owners) >= 2  # both drivers' workers did trials


class _TcpProxy:
    """A real TCP forwarder in front of PostgreSQL that a test can cut (refuse and drop every connection)."""

    def __init__(self, target=("127.0.0.1", 5432)):
        self.target = target
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.sockets: list[socket.socket] = []
        self.listener = None
        self.restore()

    def restore(self):
        self.listener = socket.create_server(("127.0.0.1", self.port), reuse_port=True)
        threading.Thread(target=self._accept, args=(self.listener,), daemon=True).start()

    def _accept(self, listener):
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            self.sockets += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src, dst):
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def cut(self):
        with contextlib.suppress(OSError):  # a listener closed while accept() blocks on it keeps listening; shut down, it stops
            self.listener.shutdown(socket.SHUT_RDWR)
        self.listener.close()
        for s in self.sockets:
            try:
                s.shutdown(socket.SHUT_RDWR)
                s.close()
            except OSError:
                pass
        self.sockets.clear()


class _CutAt(Progress):
    """Progress that cuts the database at a chosen evaluation, so the outage lands where the test needs it."""

    def __init__(self, proxy, when, outage_s=None):
        super().__init__(live=False)
        self.begin("tiny", target=3, done_before=0)
        self.proxy, self.when, self.outage_s, self.done = proxy, when, outage_s, False
        self.on_cut = lambda: None

    def evaluated(self, number, point):
        super().evaluated(number, point)
        if not self.done and self.when(point):
            self.cut()

    def cut(self):
        self.done = True
        self.proxy.cut()
        self.on_cut()
        if self.outage_s is not None:
            threading.Timer(self.outage_s, self.proxy.restore).start()


class _CutWhenServed(_CutAt):
    """Cuts the database as the driver hands a trial to the duplicate cache, its original still training: the
    lookups and writes of duplicate serving then meet the outage."""

    def __init__(self, proxy, outage_s):
        super().__init__(proxy, when=lambda point: False, outage_s=outage_s)

    def started_trial(self, number, schedule, role, seed, served=False):
        super().started_trial(number, schedule, role, seed, served)
        if not self.done and "(= trial" in schedule:
            self.cut()


def _outage_study(ray_local, tiny_config, url, n_trials):
    config = tiny_config.model_copy(update={"storage": url, "n_trials": n_trials})
    config = config.model_copy(update={"search": config.search.model_copy(update={"baseline_seeds": 1})})
    return open_study(config, open_storage(url), check_corpus(config))


def test_short_database_outage_is_ridden_out(ray_local, tiny_config):
    proxy = _TcpProxy()
    with fresh_database(f"127.0.0.1:{proxy.port}") as url:
        ctx = _outage_study(ray_local, tiny_config, url, 3)
        progress = _CutAt(proxy, lambda p: p.step == 40, outage_s=2.0)
        Driver(ctx, progress, stopping=make_stopping(ctx)).run(3, n_workers=1)
        assert progress.done
        _assert_complete(url, 3)
        proxy.cut()


def test_outage_while_serving_a_duplicate_is_ridden_out(ray_local, tiny_config):
    """The reference 1x3 is the running baseline's schedule at its seed: it waits for the baseline, and the database
    goes away for 3 s as it does. Every call of duplicate serving retries, and the copy gets the baseline's result."""
    proxy = _TcpProxy()
    with fresh_database(f"127.0.0.1:{proxy.port}") as url:
        config = tiny_config.model_copy(update={"space": tiny_config.space.model_copy(update={"references": ["1x3"]})})
        ctx = _outage_study(ray_local, config, url, 2)
        progress = _CutWhenServed(proxy, outage_s=3.0)
        Driver(ctx, progress, stopping=make_stopping(ctx)).run(2, n_workers=2)
        assert progress.done
        study = _assert_complete(url, 2)
        baseline, reference = study.trials[0], study.trials[1]
        assert (baseline.user_attrs["role"], reference.user_attrs["role"]) == ("baseline", "reference")
        assert reference.user_attrs[DUPLICATE_ATTR] == 0 and reference.values == baseline.values
        proxy.cut()


def test_long_outage_stops_with_a_clear_error_and_keeps_the_finished_result(ray_local, tiny_config, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(driver_module, "DB_RETRY_DELAYS_S", (0.2, 0.4))
    proxy = _TcpProxy()
    with fresh_database(f"127.0.0.1:{proxy.port}") as url:
        ctx = _outage_study(ray_local, tiny_config, url, 3)
        final = ctx.config.train.steps
        progress = _CutAt(proxy, lambda p: p.step == final)
        driver = Driver(ctx, progress, stopping=make_stopping(ctx))
        # the worst moment: a heartbeat falls due right after the cut, before the trial's result arrives
        progress.on_cut = lambda: setattr(driver, "_last_heartbeat", 0.0)
        with pytest.raises(DatabaseUnavailable, match=r"result of trial 0 is kept in .*undelivered-tiny.jsonl"):
            driver.run(3, n_workers=1)
        assert undelivered_path("tiny").exists()
        proxy.restore()  # the database is back: resume stores what was kept
        study = optuna.load_study(study_name="tiny", storage=url)
        assert study.trials[0].state == TrialState.RUNNING
        assert deliver_undelivered(study) == [0]
        trial = optuna.load_study(study_name="tiny", storage=url).trials[0]
        assert trial.state == TrialState.COMPLETE and len(trial.user_attrs["curve"]) == 3
        assert sorted(trial.intermediate_values) == [p[0] for p in trial.user_attrs["curve"]]
        assert not undelivered_path("tiny").exists()
        proxy.cut()
