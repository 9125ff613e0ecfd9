"""The driver: Optuna ask/tell on one side, a pool of long-lived Ray workers on the other.

    ask -> schedule -> worker.start(spec) -> worker.advance() ... each EvalPoint: report, should_prune?
        -> advance again | worker.stop() -> tell(COMPLETE | PRUNED | FAIL)

Only the driver talks to the database. Workers are Ray actors wrapping `search.trial.TrialSession`, so torch
is imported and the corpus loaded once per worker, and a worker that dies surfaces as a Ray error on the one
trial it held. Every trial the driver owns gets a heartbeat; trials left RUNNING by a driver that died are
failed once their heartbeat is stale and their schedules are queued again.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import optuna
import ray
from optuna.trial import TrialState

from prism import EvalPoint, Schedule, TrainResult
from search.config import PrismSearchError, StudyConfig
from search.progress import Progress
from search.study import FINISHED, enqueue, family_for, stored_config
from search.trial import TrialSession, TrialSpec


class TooManyFailures(PrismSearchError):
    pass


@dataclass
class _InFlight:
    trial: optuna.Trial
    schedule: Schedule
    role: str
    worker: ray.actor.ActorHandle
    pruning: bool = False
    points: list[EvalPoint] = field(default_factory=list)


def connect_ray(address: str | None, num_cpus: int) -> None:
    """Join a running cluster at `address`, or start a local Ray sized for this run's workers."""
    if ray.is_initialized():
        return
    if address:
        ray.init(address=address, log_to_driver=False)
    else:
        ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False)


def requeue_stale_trials(study: optuna.Study) -> list[int]:
    """Fail RUNNING trials whose driver stopped sending heartbeats and queue their schedules again."""
    config = stored_config(study)
    family = family_for(config)
    before = {t.number for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))}
    optuna.storages.fail_stale_trials(study)
    requeued = []
    for t in study.get_trials(deepcopy=False, states=(TrialState.FAIL,)):
        if t.number in before:
            study._storage.set_trial_user_attr(t._trial_id, "error", "driver lost (heartbeat went stale)")
            _requeue(study, family, t)
            requeued.append(t.number)
    return requeued


def _requeue(study: optuna.Study, family, trial: optuna.trial.FrozenTrial | optuna.Trial) -> None:
    attrs = trial.user_attrs
    enqueue(study, family, Schedule.parse(attrs["schedule"]), role=attrs.get("role", "search"),
            seed=attrs.get("seed", 0), retry_of=trial.number)


class Driver:
    def __init__(
        self, study: optuna.Study, config: StudyConfig, fingerprint: str, progress: Progress | None = None,
        session_cls: type[TrialSession] = TrialSession,  # what each worker runs; benchmarks pass a no-compute one
    ):
        self.study, self.config, self.fingerprint = study, config, fingerprint
        self.family = family_for(config)
        self.progress = progress
        self.failures = 0
        self.in_flight: dict[ray.ObjectRef, _InFlight] = {}
        res = config.resources
        self._worker_cls = ray.remote(session_cls).options(num_cpus=res.cpus_per_trial, num_gpus=res.gpus_per_trial)
        self.idle: list[ray.actor.ActorHandle] = []
        self._last_heartbeat = 0.0

    # -- bookkeeping -------------------------------------------------------------------------------------
    def n_finished(self) -> int:
        return len(self.study.get_trials(deepcopy=False, states=FINISHED))

    def _heartbeat(self, force: bool = False) -> None:
        now = time.monotonic()
        if force or now - self._last_heartbeat > self.study._storage.get_heartbeat_interval() / 2:
            for job in self.in_flight.values():
                self.study._storage.record_heartbeat(job.trial._trial_id)
            self._last_heartbeat = now

    def _spec(self, trial: optuna.Trial, schedule: Schedule, seed: int) -> TrialSpec:
        device = "cuda" if self.config.resources.gpus_per_trial > 0 else "cpu"
        return TrialSpec(
            study=self.config.name, number=trial.number, schedule=str(schedule),
            model=self.config.model_config_, train=self.config.train.to_train_config(seed, device),
            corpus=self.config.data.corpus, val_fraction=self.config.data.val_fraction,
            corpus_fingerprint=self.fingerprint, threads=self.config.resources.cpus_per_trial,
        )

    # -- the loop ----------------------------------------------------------------------------------------
    def _dispatch(self, worker: ray.actor.ActorHandle) -> None:
        trial = self.study.ask()
        self.study._storage.record_heartbeat(trial._trial_id)
        attrs = trial.user_attrs
        role, seed = attrs.get("role", "search"), attrs.get("seed", self.config.seed)
        if "schedule" in attrs and not self.family.contains(Schedule.parse(attrs["schedule"])):
            schedule = Schedule.parse(attrs["schedule"])  # an enqueued schedule outside the family
        else:
            schedule = self.family.suggest(trial)
        trial.set_user_attr("schedule", str(schedule))
        trial.set_user_attr("role", role)
        trial.set_user_attr("seed", seed)
        for layer, heads in enumerate(schedule.heads):
            trial.set_user_attr(f"heads_{layer:02d}", heads)
        job = _InFlight(trial, schedule, role, worker)
        self.in_flight[worker.start.remote(self._spec(trial, schedule, seed))] = job
        if self.progress:
            self.progress.started_trial(trial.number, str(schedule), role)

    def _handle(self, ref: ray.ObjectRef) -> None:
        job = self.in_flight.pop(ref)
        try:
            out = ray.get(ref)
        except ray.exceptions.RayActorError as e:
            self._fail(job, f"worker died: {type(e).__name__}: {str(e).splitlines()[0]}")
            self.idle.append(self._worker_cls.remote())  # replace the dead actor
            return
        except ray.exceptions.RayTaskError as e:
            cause = e.cause if getattr(e, "cause", None) is not None else e
            self._fail(job, f"{type(cause).__name__}: {str(cause).splitlines()[-1] if str(cause) else ''}")
            self.idle.append(job.worker)
            return
        if isinstance(out, dict):  # started: where it runs
            job.trial.set_user_attr("worker", out)
            self.in_flight[job.worker.advance.remote()] = job
            return
        if isinstance(out, EvalPoint):
            job.points.append(out)
            job.trial.report(out.val_loss, out.tokens)
            if self.progress:
                self.progress.evaluated(job.trial.number, out)
            # a trial that has spent its whole budget is complete, whatever the pruner thinks of its last rung
            final = out.step >= self.config.train.steps
            job.pruning = job.role == "search" and not final and job.trial.should_prune()
            next_ref = job.worker.stop.remote() if job.pruning else job.worker.advance.remote()
            self.in_flight[next_ref] = job
            return
        self._finish(job, out)
        self.idle.append(job.worker)

    def _record(self, job: _InFlight, result: TrainResult) -> None:
        t = job.trial
        for key in ("tokens_per_s", "n_params", "flops_per_token", "wall_time_s", "steps", "tokens"):
            t.set_user_attr(key, getattr(result, key))
        t.set_user_attr("curve", [[p.tokens, p.val_loss] for p in result.curve])

    def _finish(self, job: _InFlight, result: TrainResult) -> None:
        self._record(job, result)
        if job.pruning:
            job.trial.set_user_attr("pruned_at_tokens", result.tokens)
            self.study.tell(job.trial, state=TrialState.PRUNED)
            state, value = "PRUNED", result.final_val_loss
        else:
            self.study.tell(job.trial, result.final_val_loss)
            state, value = "COMPLETE", result.final_val_loss
        if self.progress:
            self.progress.finished(job.trial.number, state, value)

    def _fail(self, job: _InFlight, reason: str, requeue: bool = False) -> None:
        job.trial.set_user_attr("error", reason)
        self.study.tell(job.trial, state=TrialState.FAIL)
        if requeue:
            _requeue(self.study, self.family, job.trial)
        else:
            self.failures += 1
        if self.progress:
            self.progress.finished(job.trial.number, "FAIL", None, reason)

    def run(self, target: int, n_workers: int) -> None:
        """Run trials until `target` trials of the study are COMPLETE or PRUNED."""
        self.idle = [self._worker_cls.remote() for _ in range(n_workers)]
        try:
            while True:
                while self.idle and self.n_finished() + len(self.in_flight) < target:
                    if self.failures > self.config.search.max_failed_trials:
                        break
                    self._dispatch(self.idle.pop())
                if not self.in_flight:
                    break
                ready, _ = ray.wait(list(self.in_flight), num_returns=1, timeout=1.0)
                for ref in ready:
                    self._handle(ref)
                self._heartbeat()
        except KeyboardInterrupt:
            for job in list(self.in_flight.values()):
                self._fail(job, "interrupted (Ctrl-C); queued again for resume", requeue=True)
            self.in_flight.clear()
            raise
        if self.failures > self.config.search.max_failed_trials:
            raise TooManyFailures(
                f"{self.failures} trials failed (search.max_failed_trials={self.config.search.max_failed_trials}); "
                "see `prism-search status` for their errors"
            )
