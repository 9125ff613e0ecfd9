"""The driver: Optuna ask/tell on one side, a pool of long-lived Ray workers on the other.

    ask -> schedule -> worker.start(spec) -> worker.advance() ... each EvalPoint: report, should_prune?
        -> advance again | worker.stop() -> tell(COMPLETE | PRUNED | FAIL)

Only the driver talks to the database. Workers are Ray actors wrapping `search.runner.worker.TrialSession` (a study
whose [trainer] is the user's own command or function: a session of search.runner.outside), so torch is imported and the
corpus loaded once per worker, and a worker that dies surfaces as a Ray error on the one trial it held. Every trial
the driver owns gets a heartbeat; trials left RUNNING by a driver that died are
failed once their heartbeat is stale and their schedules are queued again (a served copy's only when no other
trial holds its schedule: search.runner.cache.holder).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Literal, Protocol, assert_never

import optuna
import ray
import sqlalchemy
from optuna.trial import TrialState

from prism import EvalPoint, Schedule, TrainResult
from search.analysis.budget import Budget, budget
from search.attrs import (
    ATTEMPT,
    ATTR_CHECKPOINT_ERROR,
    DUPLICATE_ATTR,
    ERROR,
    FAILED_ITSELF,
    PRUNED_AT_TOKENS,
    RETRY_OF,
    ROLE,
    ROLE_RACE,
    ROLE_SEARCH,
    SCHEDULE,
    SEED,
    THROUGHPUT_RATIO,
    WORKER,
)
from search.config import resume_command
from search.errors import DatabaseUnavailable, InfrastructureFailure, TooManyFailures
from search.runner import cache
from search.runner.checkpoints import keep_checkpoints, trial_checkpoint_dir
from search.runner.context import StudyContext
from search.runner.messages import Evaluated, Finished, Message, Started
from search.runner.outside import CommandSession, PythonSession
from search.runner.progress import StudyProgress
from search.runner.undelivered import save_undelivered
from search.runner.worker import DeviceUnavailable, DoesNotFit, TrialSession, TrialSpec
from search.signals import interrupts_held, raise_if_interrupted
from search.storage import stale_trial_ids, storage_of, trial_id
from search.storage.records import apply_constraint, claim_uid, enqueue, objective_values, result_attrs, schedule_attrs
from search.trainers import TrainerTimeout

# what a lost or refused database connection looks like through Optuna's RDBStorage
DB_ERRORS = (optuna.exceptions.StorageInternalError, sqlalchemy.exc.OperationalError, sqlalchemy.exc.InterfaceError)
DB_RETRY_DELAYS_S = (0.5, 1.0, 2.0, 4.0, 8.0)


@dataclass
class _InFlight:
    trial: optuna.Trial
    schedule: Schedule
    role: str
    worker: ray.actor.ActorHandle | None  # None: a duplicate waiting for its original (see search.runner.cache)
    pruning: bool = False
    points: list[EvalPoint] = field(default_factory=list)


def requeue_stale_trials(ctx: StudyContext) -> list[int]:
    """Fail RUNNING trials whose driver stopped sending heartbeats and queue their schedules again.

    Failing a trial is a conditional update (it must still be RUNNING), so when two drivers race over one
    stale trial exactly one of them wins and queues it again. Failed only: a trial lost before its schedule was
    drawn (nothing to run again), and a served copy whose schedule another trial holds (its original, if lost
    too, is queued again in its own right).
    """
    study = ctx.study
    storage = storage_of(study)
    requeued = []
    for stale_id in stale_trial_ids(study):
        trial = storage.get_trial(stale_id)
        held_by = cache.holder(study, trial)
        reason = "driver lost (heartbeat went stale)" + (_not_queued(held_by) if held_by is not None else "")
        try:  # the reason first: a finished trial's attrs can no longer be written
            storage.set_trial_user_attr(stale_id, ERROR, reason)
            if not storage.set_trial_state_values(stale_id, state=TrialState.FAIL):
                continue
        except optuna.exceptions.UpdateFinishedTrialError:
            continue
        if held_by is None and SCHEDULE in trial.user_attrs:
            _requeue(study, ctx.family, trial, attempt=trial.user_attrs.get(ATTEMPT, 0))
            requeued.append(trial.number)
    return requeued


def _not_queued(held_by: optuna.trial.FrozenTrial) -> str:
    return f"; not queued again: trial {held_by.number} holds its schedule"


def _requeue(study: optuna.Study, family, trial: optuna.trial.FrozenTrial | optuna.Trial, attempt: int) -> None:
    attrs = trial.user_attrs
    enqueue(
        study,
        family,
        Schedule.parse(attrs[SCHEDULE]),
        role=attrs.get(ROLE, ROLE_SEARCH),
        seed=attrs.get(SEED, 0),
        **{RETRY_OF: trial.number, ATTEMPT: attempt},
    )


def trial_schedule(trial: optuna.Trial, family) -> Schedule:  # family: a search.families.ScheduleFamily
    """What an asked trial trains: its enqueued schedule, else what the sampler's parameters decode to. An enqueued
    member of the family is decoded from its fixed parameters too, so the sampler sees its parameters."""
    attrs = trial.user_attrs
    if SCHEDULE in attrs and not family.contains(Schedule.parse(attrs[SCHEDULE])):
        return Schedule.parse(attrs[SCHEDULE])  # an enqueued schedule outside the family
    return family.suggest(trial)


class Stopping(Protocol):
    """Decides between evaluations whether a search trial goes on; the study picks it (search.study.pruning)."""

    def report(self, trial: optuna.Trial, point: EvalPoint) -> None: ...

    def should_stop(self, trial: optuna.Trial, point: EvalPoint) -> bool: ...


class Reason(Protocol):
    def text(self) -> str: ...


class BetweenTrials(Protocol):
    """A rule the driver asks between trials: which (schedule, seed) runs to queue next, and whether the study must
    stop short of its target; the study picks them (search.study.policy)."""

    name: str

    def next_runs(self, trials: Sequence[optuna.trial.FrozenTrial]) -> list[tuple[str, int]]: ...

    def stop(self, done: Budget) -> Reason | None: ...


DRAIN_S = 10.0  # how long a stopping driver waits for its other trials' calls to answer


def _read_quietly(refs: list[ray.ObjectRef]) -> None:
    """Read the answers of calls still in flight, failures included: the other workers likely met the same fault, and
    an error Ray holds unread is printed as a traceback when the run exits."""
    ready, _ = ray.wait(refs, num_returns=len(refs), timeout=DRAIN_S) if refs else ([], [])
    for ref in ready:
        with contextlib.suppress(ray.exceptions.RayError):
            ray.get(ref)


SESSIONS: dict[str, type] = {"prism": TrialSession, "command": CommandSession, "python": PythonSession}  # by [trainer] kind


class Driver:
    def __init__(
        self,
        ctx: StudyContext,
        progress: StudyProgress | None = None,
        *,
        stopping: Stopping,
        policies: Sequence[BetweenTrials] = (),
        session_cls: type | None = None,  # what each worker runs (default: the [trainer]'s); benchmarks pass a no-compute one
    ):
        self.ctx = ctx
        self.study, self.config, self.family = ctx.study, ctx.config, ctx.family
        self.stopping, self.policies = stopping, policies
        self.progress = progress
        self.failures = 0
        self.in_flight: dict[ray.ObjectRef, _InFlight] = {}
        self.asked: list[optuna.Trial] = []  # every trial this driver started; an interrupt fails those still RUNNING
        res = ctx.config.resources
        session_cls = session_cls or SESSIONS[ctx.config.trainer.kind]
        self._worker_cls = ray.remote(session_cls).options(num_cpus=res.cpus_per_trial, num_gpus=res.gpus_per_trial)
        self.idle: list[ray.actor.ActorHandle] = []
        self._last_heartbeat = 0.0
        self.stopped: Reason | None = None  # why a policy stopped the study short of its target
        self._study_uid = self._db(claim_uid, self.study)  # names its checkpoints (search.runner.checkpoints)
        self._db(keep_checkpoints, ctx, self._study_uid)  # the models an interrupted driver left

    # -- the database, always through retries ----------------------------------------------------------
    def _db(self, fn, *args, **kwargs):
        """Call a storage operation; on a lost connection retry with backoff, then give up with a clear error."""
        for delay in (*DB_RETRY_DELAYS_S, None):
            try:
                return fn(*args, **kwargs)
            except DB_ERRORS as e:
                if delay is None:
                    raise DatabaseUnavailable(
                        f"database unreachable after {len(DB_RETRY_DELAYS_S)} retries over "
                        f"{sum(DB_RETRY_DELAYS_S):.0f} s ({type(e).__name__}); bring it back, then "
                        f"`{resume_command(self.config)}`"
                    ) from None
                if self.progress:
                    self.progress.note(f"database error ({type(e).__name__}); retrying in {delay:.1f} s")
                time.sleep(delay)

    def _too_many_failures(self) -> bool:
        return self.failures > self.config.search.max_failed_trials

    def _budget(self) -> Budget:
        """Trained, training and served trials of the whole study, whichever driver owns them (search.analysis.budget)."""
        return budget(self._db(self.study.get_trials, deepcopy=False), self.config.seed)

    def _heartbeat(self) -> None:
        now = time.monotonic()
        if now - self._last_heartbeat > storage_of(self.study).get_heartbeat_interval() / 2:
            self._last_heartbeat = now
            try:
                for job in self.in_flight.values():
                    self._db(storage_of(self.study).record_heartbeat, trial_id(job.trial))
                requeued = self._db(requeue_stale_trials, self.ctx)
            except DatabaseUnavailable:
                # not worth stopping for: a result about to arrive must reach _finish, which keeps it in the
                # undelivered file if the outage lasts; any write that matters stops the run by itself
                if self.progress:
                    self.progress.note("heartbeat missed: database unreachable")
                return
            if requeued and self.progress:
                self.progress.note(f"trials {requeued} lost their driver; queued again")

    def _spec(self, trial: optuna.Trial, schedule: Schedule, seed: int) -> TrialSpec:
        return TrialSpec.of(
            self.config,
            str(schedule),
            fingerprint=self.ctx.fingerprint,
            number=trial.number,
            seed=seed,
            device="cuda" if self.config.resources.gpus_per_trial > 0 else "cpu",
            checkpoint_dir=trial_checkpoint_dir(self.config, self._study_uid, trial.number),
            keep_checkpoints=self.config.keep_checkpoints,
            probe=True,
            study_uid=self._study_uid,
        )

    # -- the loop ----------------------------------------------------------------------------------------
    def _is_surplus(self, trial: optuna.Trial, target: int) -> bool:
        """True when trials numbered before this one already fill the target (another driver got there first)."""
        ahead = budget((t for t in self._db(self.study.get_trials, deepcopy=False) if t.number < trial.number), self.config.seed)
        return ahead.trained + ahead.running >= target

    def _queue_next(self, target: int) -> Budget:
        """Queue the runs the policies ask for (role race, the seed they run), as many as the target has room for:
        queued trials are asked before the sampler, so they run first. Returns the study's budget after."""
        trials = self._db(self.study.get_trials, deepcopy=False)
        b = budget(trials, self.config.seed)
        room = max(0, target - b.trained - b.running - b.waiting)
        queued = False
        for policy in self.policies:
            runs = policy.next_runs(trials)[:room] if room else []
            for schedule, seed in runs:
                self._db(enqueue, self.study, self.family, Schedule.parse(schedule), role=ROLE_RACE, seed=seed)
            if runs and self.progress:
                self.progress.note(f"{policy.name}: queued " + ", ".join(f"{schedule} at seed {seed}" for schedule, seed in runs))
            room -= len(runs)
            queued = queued or bool(runs)
        return self._budget() if queued else b

    def _ask(self, target: int) -> tuple[optuna.Trial, Schedule, str, int] | None:
        """A new trial with its schedule, role and seed, stored before Ctrl-C or SIGTERM can act; None when the trial is
        surplus (failed, and given back to the queue if it came from there). An interrupt that landed inside `ask` left a RUNNING
        trial the handler could not find; one that landed before the schedule's attrs left a trial that could not be
        queued again, and under the grid sampler its grid point counted as visited, so that schedule never trained."""
        with interrupts_held():
            trial = self._db(self.study.ask)
            self.asked.append(trial)
            self._db(storage_of(self.study).record_heartbeat, trial_id(trial))
            attrs = trial.user_attrs
            if self._is_surplus(trial, target):
                self._db(trial.set_user_attr, ERROR, "surplus: the study reached its target through another driver")
                self._db(self.study.tell, trial, state=TrialState.FAIL)
                if SCHEDULE in attrs:  # it came from the queue: give it back
                    self._db(_requeue, self.study, self.family, trial, attempt=attrs.get(ATTEMPT, 0))
                return None
            role, seed = attrs.get(ROLE, ROLE_SEARCH), attrs.get(SEED, self.config.seed)
            schedule = self._db(trial_schedule, trial, self.family)
            for key, value in schedule_attrs(schedule, role, seed).items():
                self._db(trial.set_user_attr, key, value)
        return trial, schedule, role, seed

    def _dispatch(self, worker: ray.actor.ActorHandle, target: int) -> Literal["surplus", "served", "trained"]:
        asked = self._ask(target)
        if asked is None:
            return "surplus"
        trial, schedule, role, seed = asked
        if role == ROLE_SEARCH and (failed := self._db(cache.failed_before, self.study, str(schedule), trial.number)) is not None:
            self._serve_failure(trial, schedule, role, seed, failed, worker)
            return "served"
        if self._serve_duplicate(trial, schedule, role, seed, worker):
            return "served"
        job = _InFlight(trial, schedule, role, worker)
        self.in_flight[worker.start.remote(self._spec(trial, schedule, seed))] = job
        if self.progress:
            self.progress.started_trial(trial.number, str(schedule), role, seed)
        return "trained"

    def _handle(self, ref: ray.ObjectRef) -> None:
        job = self.in_flight.pop(ref)
        try:
            out: Message = ray.get(ref)
        except (ray.exceptions.RayActorError, ray.exceptions.RayTaskError) as e:
            # an interrupt that a finalizer swallowed during the call (search.signals) may be what broke it: then the
            # trial was interrupted, not failed, and the interrupt handler in `run` queues it again
            raise_if_interrupted()
            self._fail_run(job, e)
            return
        if self.progress and not isinstance(out, cache.Wait):
            for warning in out.warnings:
                self.progress.note(f"trial {job.trial.number}'s worker warned: {warning}")
        match out:
            case cache.Wait():
                self._await_original(job, out)
            case Started(where):
                assert job.worker is not None  # a worker says it started
                self._db(job.trial.set_user_attr, WORKER, where)
                self.in_flight[job.worker.advance.remote()] = job
            case Evaluated(point):
                assert job.worker is not None
                job.points.append(point)
                self._db(self.stopping.report, job.trial, point)
                if self.progress:
                    self.progress.evaluated(job.trial.number, point)
                # a trial that has spent its whole budget is complete, whatever the pruner thinks of its last rung
                final = point.step >= self.config.train.steps
                job.pruning = job.role == ROLE_SEARCH and not final and self._db(self.stopping.should_stop, job.trial, point)
                next_ref = job.worker.stop.remote() if job.pruning else job.worker.advance.remote()
                self.in_flight[next_ref] = job
            case Finished(result):
                self.idle.append(job.worker)
                self._finish(job, result)
            case _:
                assert_never(out)

    def _fail_run(self, job: _InFlight, e: ray.exceptions.RayActorError | ray.exceptions.RayTaskError) -> None:
        """A dead worker is replaced and its trial retried; an error the trial raised fails it."""
        if isinstance(e, ray.exceptions.RayActorError):
            self.idle.append(self._worker_cls.remote())
            self._fail(job.trial, f"worker died: {type(e).__name__}: {str(e).splitlines()[0]}", retry=True)
            return
        cause = e.cause if getattr(e, "cause", None) is not None else e
        self.idle.append(job.worker)
        if isinstance(cause, DeviceUnavailable):  # the node's fault: no schedule is to blame, and every trial would fail
            self._fail(job.trial, f"{type(cause).__name__}: {cause}", requeue=True)
            resume = resume_command(self.config)
            raise InfrastructureFailure(f"{cause}; the study stopped, no trial counted as failed; fix it, then `{resume}`")
        if isinstance(cause, DoesNotFit):  # the trials sharing its GPU may have taken the memory: retried, not marked
            self._fail(job.trial, f"{type(cause).__name__}: {cause}", retry=True)
            return
        if not isinstance(cause, TrainerTimeout):  # a time-out may pass on a quieter machine; any other error repeats
            self._db(job.trial.set_user_attr, FAILED_ITSELF, True)
        self._fail(job.trial, f"{type(cause).__name__}: {str(cause).splitlines()[-1] if str(cause) else ''}")

    def _record(self, job: _InFlight, result: TrainResult) -> None:
        for key, value in result_attrs(result).items():
            self._db(job.trial.set_user_attr, key, value)
        self._db(apply_constraint, job.trial, self.config, result.extra.get(THROUGHPUT_RATIO))

    def _finish(self, job: _InFlight, result: TrainResult) -> None:
        state = TrialState.PRUNED if job.pruning else TrialState.COMPLETE
        # a pruned trial is told no values: an outside trainer stopped before its end never measured its speed
        values = [] if job.pruning else objective_values(result, self.config.search.objectives)
        try:
            self._record(job, result)
            if job.pruning:
                self._db(job.trial.set_user_attr, PRUNED_AT_TOKENS, result.tokens)
                self._db(self.study.tell, job.trial, state=state)
            else:
                self._db(self.study.tell, job.trial, values)
        except DatabaseUnavailable:
            path = save_undelivered(self.config.name, job.trial.number, state, values, result_attrs(result))
            raise DatabaseUnavailable(
                f"database unreachable; the result of trial {job.trial.number} is kept in {path}. Bring the "
                f"database back, then `{resume_command(self.config)}` stores it"
            ) from None
        self._db(keep_checkpoints, self.ctx, self._study_uid)
        self._track(job.trial)
        if self.progress:
            self.progress.finished(job.trial.number, state.name, result.final_val_loss)
            if lost := result.extra.get(ATTR_CHECKPOINT_ERROR):
                self.progress.note(f"trial {job.trial.number}: {lost}; its result is stored")

    def _track(self, trial: optuna.Trial) -> None:
        """The driver, the only writer, hands each finished trial as stored to the trackers; they never raise."""
        if self.ctx.trackers:
            frozen = self._db(storage_of(self.study).get_trial, trial_id(trial))
            for tracker in self.ctx.trackers:
                tracker(self.study, frozen)

    def _fail(self, trial: optuna.Trial, reason: str, retry: bool = False, requeue: bool = False) -> None:
        """Fail `trial`: queue it again (`requeue`), retry it while retries last (`retry`), else count a failure.
        A served copy whose schedule another trial holds is neither queued again nor counted (cache.holder)."""
        held_by = self._db(cache.holder, self.study, trial) if retry or requeue else None
        if held_by is not None:
            reason += _not_queued(held_by)
        elif requeue:
            reason += "; queued again"
        self._db(trial.set_user_attr, ERROR, reason)
        self._db(self.study.tell, trial, state=TrialState.FAIL)
        attempt = trial.user_attrs.get(ATTEMPT, 0)
        if held_by is None:
            if requeue:  # not the trial's fault (Ctrl-C, a failed original): run it again, count no failure
                self._db(_requeue, self.study, self.family, trial, attempt=attempt)
            elif retry and attempt < self.config.resources.max_retries:
                self._db(_requeue, self.study, self.family, trial, attempt=attempt + 1)
                reason += f" (retry {attempt + 1}/{self.config.resources.max_retries} queued)"
            else:
                self.failures += 1
        if self.progress:
            self.progress.finished(trial.number, "FAIL", None, reason)

    # -- duplicates (search.runner.cache): a schedule trains once per seed ---------------------------------------
    def _serve_duplicate(self, trial: optuna.Trial, schedule: Schedule, role: str, seed: int, worker) -> bool:
        """Give `trial` a stored result, or park it until the running original ends; False: train it."""
        original = self._db(cache.find_original, self.study, str(schedule), seed, trial.number)
        if original is None:
            return False
        self._db(trial.set_user_attr, DUPLICATE_ATTR, original.number)
        self.idle.append(worker)
        job = _InFlight(trial, schedule, role, None)
        if self.progress:
            self.progress.started_trial(trial.number, f"{schedule} (= trial {original.number})", role, seed, served=True)
        self._await_original(job, cache.Wait(trial_id(original)))
        return True

    def _serve_failure(
        self, trial: optuna.Trial, schedule: Schedule, role: str, seed: int, failed: optuna.trial.FrozenTrial, worker
    ) -> None:
        """`trial` proposes a schedule that failed by its own error in trial `failed`: failed at once, untrained, and
        counted toward neither n_trials nor max_failed_trials (search.runner.cache.failed_before)."""
        self.idle.append(worker)
        self._db(trial.set_user_attr, DUPLICATE_ATTR, failed.number)
        reason = f"not trained: {schedule} failed in trial {failed.number}"
        self._db(trial.set_user_attr, ERROR, reason)
        self._db(self.study.tell, trial, state=TrialState.FAIL)
        if self.progress:
            self.progress.started_trial(trial.number, f"{schedule} (= trial {failed.number})", role, seed, served=True)
            self.progress.finished(trial.number, "FAIL", None, reason)

    def _await_original(self, job: _InFlight, wait: cache.Wait) -> None:
        original = self._db(storage_of(self.study).get_trial, wait.original_id)
        if original.state == TrialState.RUNNING:
            self.in_flight[cache.wait_for(original)] = job
        elif original.state == TrialState.FAIL:
            self._fail(job.trial, f"original trial {original.number} failed", requeue=True)
        else:
            state = self._db(cache.copy_result, self.study, job.trial, original)  # idempotent until its tell: safe to retry
            self._track(job.trial)
            if self.progress:
                value = original.values[0] if original.values else None
                self.progress.finished(job.trial.number, state.name, value, served=True)

    def _wait_and_handle(self) -> None:
        ready, _ = ray.wait(list(self.in_flight), num_returns=1, timeout=1.0)
        for ref in ready:
            self._handle(ref)
        self._heartbeat()

    def _check_stop(self, b: Budget) -> bool:
        """Sets `stopped` (and says so once) when a policy ends the study short of its target."""
        said = self.stopped
        self.stopped = next((why for policy in self.policies if (why := policy.stop(b)) is not None), None)
        if self.stopped and not said and self.progress:
            self.progress.note(self.stopped.text())
        return self.stopped is not None

    def _release_workers(self) -> None:
        """End this run's idle workers: each holds its CPUs (and GPU share) while it lives, so the next driver of the
        same command (confirmation round 2 after round 1, the search after `--prior auto`'s baselines) could not
        start one of its own on a cluster sized for `workers`."""
        for worker in self.idle:
            ray.kill(worker)
        self.idle = []

    def run(self, target: int, n_workers: int, queued_only: bool = False) -> None:
        """Run trials until the study has `target` trained trials (served duplicates do not count), counting every
        driver's, or until a policy stops it (the space is exhausted: search.study.policy). A grid study's caller caps `target` at
        what its walk can reach (search.study.samplers.reachable_target). `queued_only`: train the queued trials and
        never ask the sampler (an experiment's pairs, search.study.experiment), so a failed run leaves a gap rather
        than a sampled stranger."""
        self.idle = [self._worker_cls.remote() for _ in range(n_workers)]
        try:
            while True:
                raise_if_interrupted()  # a Ctrl-C or SIGTERM that landed in a finalizer, and was only printed there
                if not self.idle and self.in_flight:  # nothing to dispatch: skip the count (a full read of the study)
                    self._wait_and_handle()
                    continue
                b = self._queue_next(target)
                running, streak, waiting = b.running, b.streak, b.waiting
                while (
                    self.idle
                    and b.trained + running < target
                    and (waiting > 0 or not queued_only)
                    and not self._too_many_failures()
                    and not self._check_stop(replace(b, streak=streak))
                ):
                    worker = self.idle.pop()
                    outcome = self._dispatch(worker, target)
                    waiting -= 1
                    if outcome == "surplus":
                        self.idle.append(worker)
                        break  # another driver filled the target first
                    if outcome == "trained":
                        running, streak = running + 1, 0
                    else:  # served: the worker is idle again, the sampler is asked again
                        streak += 1
                if not self.in_flight:
                    stuck = queued_only and waiting <= 0  # nothing queued is left to train
                    if running == 0 or stuck or b.trained >= target or self._too_many_failures() or self.stopped:
                        break
                    time.sleep(1.0)  # another driver's trials are running: wait for them (or for them to go stale)
                    self._heartbeat()
                    continue
                self._wait_and_handle()
        # KeyboardInterrupt: also SIGTERM (search.cli); it may land mid-handling, off in_flight
        except (KeyboardInterrupt, InfrastructureFailure) as stop:
            why = "interrupted (Ctrl-C)" if isinstance(stop, KeyboardInterrupt) else "stopped: a node cannot run trials"
            if isinstance(stop, InfrastructureFailure):
                _read_quietly(list(self.in_flight))
            still_running = {trial_id(t) for t in self._db(self.study.get_trials, deepcopy=False, states=(TrialState.RUNNING,))}
            for trial in self.asked:
                if trial_id(trial) in still_running:
                    self._fail(trial, why, requeue=SCHEDULE in trial.user_attrs)
            self.in_flight.clear()
            raise
        finally:
            self._release_workers()
        if self._too_many_failures():
            raise TooManyFailures(
                f"{self.failures} trials failed (search.max_failed_trials={self.config.search.max_failed_trials}); "
                "see `prism-search status` for their errors"
            )
