"""What a study and its trials store: the names of their Optuna attrs, shared by every writer (runner, study)
and reader (study, export, dashboard) of a study, so none of them spells a key on its own.

A study stores its full validated config and its corpus fingerprint, so `resume NAME` needs no TOML and refuses
a corpus that changed.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

import optuna
from optuna.trial import TrialState

from search.config import ConfigError, PrismSearchError, StudyConfig, parse_config

if TYPE_CHECKING:
    from prism import Schedule, TrainResult
    from search.families import ScheduleFamily

ATTR_CONFIG = "prism.config"
ATTR_FINGERPRINT = "prism.corpus_fingerprint"
ATTR_CONFIRMATION = "prism.confirmation"  # + ".plan": the schedules and seed count `confirm` queued
ATTR_PRIOR = "prism.prior"  # the prior a study was seeded with (search.study.lifecycle), JSON
ATTR_AUDIT = "prism.audit"  # the geometry profile behind it, JSON; on a trial: that trial's own audit
FINISHED = (TrialState.COMPLETE, TrialState.PRUNED)

DUPLICATE_ATTR = "duplicate_of"  # the number of the trial whose result this one copied (see search.runner.cache)
ATTR_CHECKPOINT = "checkpoint"  # the directory of the trial's saved model, when the study keeps checkpoints
RESULT_KEYS = ("tokens_per_s", "n_params", "flops_per_token", "wall_time_s", "steps", "tokens")


def heads_attr(layer: int) -> str:
    """One attr per layer (`heads_00`, ...), so Optuna's and our dashboards can plot each layer's head count."""
    return f"heads_{layer:02d}"


def schedule_attrs(schedule: Schedule, role: str, seed: int) -> dict:
    """What a trial stores before it trains: its schedule, why it runs (search, baseline, ...) and its seed."""
    return {"schedule": str(schedule), "role": role, "seed": seed} | {
        heads_attr(layer): heads for layer, heads in enumerate(schedule.heads)
    }


def objective_values(result: TrainResult, objectives: Sequence[str]) -> list[float]:
    """A result's values for the study's objectives (search.config.OBJECTIVES); the raw tokens/s is also an attr."""
    by_name = {"val_loss": result.final_val_loss, "throughput": result.extra["throughput_ratio"], "tokens_per_s": result.tokens_per_s}
    return [by_name[name] for name in objectives]


def result_attrs(result: TrainResult) -> dict:
    """How a result is stored on its trial: the same for every path that stores one."""
    curve = [[p.tokens, p.val_loss] for p in result.curve]
    return {k: getattr(result, k) for k in RESULT_KEYS} | {"curve": curve} | dict(result.extra)


def enqueue(study: optuna.Study, family: ScheduleFamily, schedule: Schedule, *, role: str, seed: int, **attrs) -> None:
    """Queue a schedule. A schedule outside the family still runs; its params are then left to the sampler."""
    params = family.params_for(schedule) if family.contains(schedule) else {}
    study.enqueue_trial(params, user_attrs={"role": role, "seed": seed, "schedule": str(schedule), **attrs})


def stored_config(study: optuna.Study) -> StudyConfig:
    raw = study.user_attrs.get(ATTR_CONFIG)
    if raw is None:
        raise PrismSearchError(f"study {study.study_name!r} was not created by prism-search (no stored config)")
    source = f"stored config of study {study.study_name!r}"
    try:
        return parse_config(json.loads(raw), source, stored=True)
    except json.JSONDecodeError as e:
        raise ConfigError(f"{source}: not valid JSON ({e}); the study attr {ATTR_CONFIG!r} was changed outside prism-search") from None
    except ConfigError as e:  # the TOML hint ("remove it") does not apply to a stored study
        raise ConfigError(f"{str(e).split('; ')[0]}; open the study with the prism-search version that created it") from None


def find_study(name: str, storage: optuna.storages.BaseStorage) -> optuna.Study:
    """The stored study `name` as Optuna opens it (default sampler: for reading), or one line naming the studies there."""
    try:
        return optuna.load_study(study_name=name, storage=storage)
    except KeyError:
        names = ", ".join(s.study_name for s in optuna.get_all_study_summaries(storage)) or "none"
        raise PrismSearchError(f"no study named {name!r} in this storage (studies: {names}); check the name or --storage") from None
