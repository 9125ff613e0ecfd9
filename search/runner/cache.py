"""Duplicate cache: a schedule is trained at most once per seed in a study.

Families map many parameter vectors to one schedule and samplers re-propose schedules they have seen (TPE often
does, even while the first copy still runs). A study's model, training config and corpus never change (the
stored config and corpus fingerprint guard that), so (schedule, seed) identifies a training run. A trial whose
key matches a COMPLETE or PRUNED trial gets that trial's stored result; one whose key matches a RUNNING trial
waits for it (holding no worker) and then gets its result. Either way it carries user attr `duplicate_of`.
If the original fails, the waiting copy is failed too and its schedule queued again, so it trains for real, unless
another trial holds the schedule (`holder`: the original's retry, typically). A copy lost with its driver or
interrupted is queued again on the same terms. Queued next to a holder, a copy could only be served again, and a
study at its target would never take it from the queue.
A served trial is told to the sampler, so it learns, but does not count toward n_trials (search.analysis.budget).

A schedule whose trial failed by its own error (FAILED_ITSELF: its trainer raised, exited non-zero or diverged) would
only fail again: proposed again, at any seed, it is served as a failure without training (`failed_before`), and
counts toward neither n_trials nor max_failed_trials.
"""

from __future__ import annotations

import asyncio

import optuna
import ray
from optuna.trial import FrozenTrial, TrialState

from search.attrs import DUPLICATE_ATTR, ERROR, FAILED_ITSELF, REFERENCE, RETRY_OF, ROLE, SCHEDULE, SEED, WORKER
from search.runner.messages import Wait
from search.storage import trial_id

WAIT_POLL_S = 1.0
# attrs that describe the copy itself, not the training run it shares
_OWN_ATTRS = {ROLE, SEED, SCHEDULE, WORKER, RETRY_OF, ERROR, REFERENCE}
_USABLE = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING)


@ray.remote(num_cpus=0)
class _Clock:
    """Wakes waiting duplicates. One async actor per driver: a poll is a cheap call, not a new worker process."""

    async def after(self, wait: Wait, seconds: float) -> Wait:
        await asyncio.sleep(seconds)
        return wait


_clocks: dict[str, ray.actor.ActorHandle] = {}  # per Ray job: a handle dies with its cluster connection


def wait_for(original: FrozenTrial) -> ray.ObjectRef:
    """A reference that becomes ready in WAIT_POLL_S seconds: the driver then looks at the original again."""
    job = ray.get_runtime_context().get_job_id()
    if job not in _clocks:
        _clocks[job] = _Clock.remote()  # type: ignore[attr-defined]  # ray.remote made the class an actor
    return _clocks[job].after.remote(Wait(trial_id(original)), WAIT_POLL_S)


def _runs_of(study: optuna.Study, schedule: str, seed: int, number: int, states: tuple[TrialState, ...]) -> list[FrozenTrial]:
    """Trials in `states` other than `number` that train `schedule` at `seed` themselves (served copies do not)."""
    return [
        t
        for t in study.get_trials(deepcopy=False, states=states)
        if t.number != number
        and DUPLICATE_ATTR not in t.user_attrs
        and t.user_attrs.get(SCHEDULE) == schedule
        and t.user_attrs.get(SEED) == seed
    ]


def find_original(study: optuna.Study, schedule: str, seed: int, number: int) -> FrozenTrial | None:
    """The first finished trial that trained `schedule` at `seed`, else the first one training it now."""
    matches = _runs_of(study, schedule, seed, number, _USABLE)
    finished = [t for t in matches if t.state != TrialState.RUNNING]
    return next(iter(finished or matches), None)


def failed_before(study: optuna.Study, schedule: str, number: int) -> FrozenTrial | None:
    """The first trial other than `number` that trained `schedule` (at any seed) and failed by its own error."""
    failed = study.get_trials(deepcopy=False, states=(TrialState.FAIL,))
    return next(
        (t for t in failed if t.number != number and t.user_attrs.get(FAILED_ITSELF) and t.user_attrs.get(SCHEDULE) == schedule), None
    )


def holder(study: optuna.Study, trial: FrozenTrial | optuna.Trial) -> FrozenTrial | None:
    """For a served copy, a trial that trained, trains or is queued to train its schedule at its seed (then the
    copy is not queued again); None for any other trial, or a copy whose schedule nothing else holds."""
    attrs = trial.user_attrs
    if DUPLICATE_ATTR not in attrs:
        return None
    return next(iter(_runs_of(study, attrs[SCHEDULE], attrs[SEED], trial.number, (*_USABLE, TrialState.WAITING))), None)


def copy_result(study: optuna.Study, trial: optuna.Trial, original: FrozenTrial) -> TrialState:
    """Tell `trial` exactly what `original` got: metrics, constraint, intermediate values, state and values."""
    for key, value in original.user_attrs.items():
        if key not in _OWN_ATTRS:
            trial.set_user_attr(key, value)
    trial.set_user_attr(DUPLICATE_ATTR, original.number)
    for key, value in original.constraints.items():
        trial.set_constraint(key, value)
    if original.state == TrialState.PRUNED:
        if len(study.directions) == 1:  # a pruned single-objective trial's value is its last intermediate one
            for step, value in sorted(original.intermediate_values.items()):
                trial.report(value, step)
        study.tell(trial, state=TrialState.PRUNED)
    else:
        study.tell(trial, original.values)
    return original.state
