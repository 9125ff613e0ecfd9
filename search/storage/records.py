"""What a study and its trials store, written and read one way by every path (the names: search.attrs).

A study stores its full validated config and its corpus fingerprint, so `resume NAME` needs no TOML and refuses
a corpus that changed.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

import optuna
from optuna.trial import FrozenTrial, TrialState

from search.attrs import (
    ATTEMPT,
    ATTR_AUDIT,
    ATTR_CHECKPOINT,
    ATTR_CHECKPOINT_ERROR,
    ATTR_CONFIG,
    ATTR_STUDY_HOME,
    ATTR_STUDY_UID,
    CURVE,
    DUPLICATE_ATTR,
    ERROR,
    FAILED_ITSELF,
    FLOPS_PER_TOKEN,
    HEADS_PREFIX,
    N_PARAMS,
    PRIOR_RANK,
    PRUNED_AT_RUNG,
    PRUNED_AT_TOKENS,
    REFERENCE,
    RESULT_KEYS,
    RETRY_OF,
    ROLE,
    RUNG_PREFIX,
    SCHEDULE,
    SEED,
    SOURCE,
    STEPS,
    THROUGHPUT_RATIO,
    TOKENS,
    TOKENS_PER_S,
    UNIFORM_TOKENS_PER_S,
    WALL_TIME_S,
    WORKER,
    heads_attr,
)
from search.config import OBJECTIVES, Flags, StudyConfig, parse_config
from search.errors import ConfigError, PrismSearchError, StudyUnreadable, Unreadable
from search.outputs.urls import mask_in
from search.storage import study_home

if TYPE_CHECKING:
    from prism import Schedule, TrainResult
    from search.families import ScheduleFamily

FINISHED = (TrialState.COMPLETE, TrialState.PRUNED)


def _integer(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)  # JSON true is no count


def _number(value: object) -> bool:
    return _integer(value) or isinstance(value, float)


def _text(value: object) -> bool:
    return isinstance(value, str)


def _curve(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(p, list) and len(p) == 2 and all(map(_number, p)) for p in value)


_WORKER_KEYS = {"host": _text, "pid": _integer, "device": _text, "kernels": _text, "folder": _text, "call": _text}


def _worker(value: object) -> bool:
    return isinstance(value, dict) and all(check(value[key]) for key, check in _WORKER_KEYS.items() if key in value)


def _audit(value: object) -> bool:
    return isinstance(value, (list, dict, str))  # rows, rows by probe set, or JSON text: its readers check the rows


Kind = tuple[str, Callable[[object], bool]]
INTEGER: Kind = ("an integer", _integer)
NUMBER: Kind = ("a number", _number)
TEXT: Kind = ("text", _text)
# every trial attr a reader uses, with the kind its writer stores
TRIAL_ATTR_KINDS: dict[str, Kind] = {
    SCHEDULE: TEXT,
    ROLE: TEXT,
    SEED: INTEGER,
    REFERENCE: TEXT,
    CURVE: ("a list of [tokens, val loss] pairs", _curve),
    ATTEMPT: INTEGER,
    RETRY_OF: INTEGER,
    ERROR: TEXT,
    FAILED_ITSELF: ("true or false", lambda value: isinstance(value, bool)),
    WORKER: ("a mapping of host, pid, device, kernels, and an outside trainer's folder and call", _worker),
    PRUNED_AT_TOKENS: INTEGER,
    PRUNED_AT_RUNG: INTEGER,
    SOURCE: TEXT,
    PRIOR_RANK: INTEGER,
    DUPLICATE_ATTR: INTEGER,
    ATTR_CHECKPOINT: TEXT,
    ATTR_CHECKPOINT_ERROR: TEXT,
    ATTR_AUDIT: ("a list, a mapping or JSON text", _audit),
    TOKENS_PER_S: NUMBER,
    N_PARAMS: INTEGER,
    FLOPS_PER_TOKEN: NUMBER,
    WALL_TIME_S: NUMBER,
    STEPS: INTEGER,
    TOKENS: INTEGER,
    THROUGHPUT_RATIO: NUMBER,
    UNIFORM_TOKENS_PER_S: NUMBER,
}
PREFIX_KINDS: dict[str, Kind] = {HEADS_PREFIX: INTEGER, RUNG_PREFIX: NUMBER}  # heads_00, ...; rung_0, ...


def malformed(trial: FrozenTrial) -> str | None:
    """Why a stored trial cannot be read (an attr the product reads holds another kind than its writer stores:
    changed outside prism-search), or None. Readers leave such a trial out and name it (`readable`)."""
    for key, value in trial.user_attrs.items():
        kind = TRIAL_ATTR_KINDS.get(key) or next((k for p, k in PREFIX_KINDS.items() if key.startswith(p)), None)
        if kind is not None and not kind[1](value):
            return f"its attr {key!r} is {type(value).__name__} {mask_in(repr(value))[:40]}, not {kind[0]}"  # no password shown
    return None


def readable(trials: Sequence[FrozenTrial]) -> tuple[list[FrozenTrial], dict[int, str]]:
    """The trials a reader can use, and why each other one cannot (by trial number): one malformed trial is left
    out and named, never the end of the command that reads it."""
    reasons = {t.number: why for t in trials if (why := malformed(t)) is not None}
    return [t for t in trials if t.number not in reasons], reasons


def schedule_attrs(schedule: Schedule, role: str, seed: int) -> dict:
    """What a trial stores before it trains: its schedule, why it runs (search, baseline, ...) and its seed."""
    return {SCHEDULE: str(schedule), ROLE: role, SEED: seed} | {heads_attr(layer): heads for layer, heads in enumerate(schedule.heads)}


def objective_values(result: TrainResult, objectives: Sequence[str]) -> list[float]:
    """A result's values for the study's objectives; the raw tokens/s is also an attr."""
    return [OBJECTIVES[name].of(result) for name in objectives]


def apply_constraint(trial: optuna.Trial, config: StudyConfig, ratio: float | None) -> None:
    """The neutrality constraint (search.analysis.constraints), stored on the trial: feasible when <= 0."""
    if config.search.min_throughput_ratio is not None and ratio is not None:
        trial.set_constraint(THROUGHPUT_RATIO, config.search.min_throughput_ratio - ratio)


def result_attrs(result: TrainResult) -> dict:
    """How a result is stored on its trial: the same for every path that stores one."""
    curve = [[p.tokens, p.val_loss] for p in result.curve]
    known = {k: v for k in RESULT_KEYS if (v := getattr(result, k)) is not None}  # an unknown figure is left out, never 0
    return known | {CURVE: curve} | dict(result.extra)


def enqueue(study: optuna.Study, family: ScheduleFamily, schedule: Schedule, *, role: str, seed: int, **attrs) -> None:
    """Queue a schedule. A schedule outside the family still runs; its params are then left to the sampler."""
    params = family.params_for(schedule) if family.contains(schedule) else {}
    study.enqueue_trial(params, user_attrs={ROLE: role, SEED: seed, SCHEDULE: str(schedule), **attrs})


def run_of(attrs: Mapping) -> tuple:
    """The run a trial is a try of: its role, schedule and seed. A retried or re-queued trial is a new try of it."""
    return attrs.get(ROLE), attrs.get(SCHEDULE), attrs.get(SEED)


def failed_for_good(trials: Sequence[FrozenTrial]) -> dict[tuple, FrozenTrial]:
    """Each run all of whose tries FAILed, with its last try: whatever the driver tries again (a lost worker,
    Ctrl-C, a stale driver) gets a newer try queued, so these failed with no retry left or were not retryable.
    Not a run whose schedule another trial still trains at its seed: queued again, it is served that result
    (search.runner.cache)."""
    tries: dict[tuple, list[FrozenTrial]] = {}
    for t in trials:
        tries.setdefault(run_of(t.user_attrs), []).append(t)
    alive = {run_of(t.user_attrs)[1:] for t in trials if t.state != TrialState.FAIL}  # (schedule, seed)
    return {run: ts[-1] for run, ts in tries.items() if all(t.state == TrialState.FAIL for t in ts) and run[1:] not in alive}


def stored_config(study: optuna.Study, flags: Flags | None = None) -> StudyConfig:
    """The config `study` was created with (the command line's `flags` on top), parsed once."""
    raw = study.user_attrs.get(ATTR_CONFIG)
    if raw is None:
        raise PrismSearchError(f"study {study.study_name!r} was not created by prism-search (no stored config)")
    source = f"stored config of study {study.study_name!r}"
    if not isinstance(raw, str):  # the writer stores the config's JSON text
        raise StudyUnreadable(
            Unreadable(study.study_name, f"user attr {ATTR_CONFIG!r}", f"holds {type(raw).__name__}, not the config's JSON text")
        )
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError as e:
        raise ConfigError(f"{source}: not valid JSON ({e}); the study attr {ATTR_CONFIG!r} was changed outside prism-search") from None
    if not isinstance(parsed, dict):
        raise ConfigError(
            f"{source}: holds a JSON {type(parsed).__name__}, not a table; the study attr {ATTR_CONFIG!r} was changed outside prism-search"
        )
    try:
        return parse_config(parsed, source, stored=True, flags=flags)
    except ConfigError as e:
        if "with the command line's --" in str(e):
            raise  # a flag out of bounds: its message names it
        # the TOML hint ("remove it") does not apply to a stored study
        raise ConfigError(f"{str(e).split('; ')[0]}; open the study with the prism-search version that created it") from None


def study_uid(study: optuna.Study) -> str | None:
    """What tells this stored study from any other of its name (made at creation); None for a study made before
    studies had one."""
    uid = study.user_attrs.get(ATTR_STUDY_UID)
    return uid if isinstance(uid, str) else None


def claim_uid(study: optuna.Study) -> str | None:
    """The id a driver writes this study's checkpoints under (search.runner.checkpoints): its stored id, claimed for
    where the study lives (`study_home`). A copy of the study (its database copied, or `optuna.copy_study`) carries
    the id but not the home: the first time it writes it gets an id of its own, so it never writes into, or cleans
    up, the folder of the study it was copied from."""
    uid = study_uid(study)
    if uid is None:
        return None  # a study made before ids: its folder is its name's
    home, here = study.user_attrs.get(ATTR_STUDY_HOME), study_home(study)
    if home == here:
        return uid
    if home is not None:
        uid = uuid.uuid4().hex
        study.set_user_attr(ATTR_STUDY_UID, uid)
    study.set_user_attr(ATTR_STUDY_HOME, here)
    return uid


def is_copy(study: optuna.Study) -> bool:
    """A copy of a study stored elsewhere that has not written yet: the models its trials name are the original's."""
    home = study.user_attrs.get(ATTR_STUDY_HOME)
    return home is not None and home != study_home(study)


def find_study(name: str, storage: optuna.storages.BaseStorage) -> optuna.Study:
    """The stored study `name` as Optuna opens it (default sampler: for reading), or one line naming the studies there."""
    try:
        return optuna.load_study(study_name=name, storage=storage)
    except KeyError:
        names = ", ".join(s.study_name for s in storage.get_all_studies()) or "none"  # names only: no study's trials
        raise PrismSearchError(f"no study named {name!r} in this storage (studies: {names}); check the name or --storage") from None
