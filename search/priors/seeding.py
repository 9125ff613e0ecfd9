"""Priors in a study: the `prior` file, seeding a study with it, narrowing early proposals, and `--prior auto`.

Seeding enqueues the prior's schedules right after whatever the study already queued (baselines, references),
as ordinary prunable search trials tagged `source=prior`. With `search.prior_strength` > 0 the next
`search.n_startup_trials` proposals are drawn near the prior schedules instead of uniformly at random: each
parameter, with probability prior_strength, is taken from a prior schedule's encoding (trials cycle through the
priors) and moved by at most one step; otherwise the study's own sampler draws it. After that the study's
sampler runs unchanged, learning from every trial, prior or not.

The study keeps what it was seeded with (user attrs ATTR_PRIOR and ATTR_AUDIT, JSON) so `resume` narrows the
same way and the dashboard can plot the profile and zones against each trial's schedule.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution, IntDistribution
from optuna.trial import FrozenTrial, TrialState

from prism import Schedule, ScheduleError, validate
from search.config import StudyConfig
from search.errors import PriorError
from search.priors._files import read_versioned_json
from search.priors.audit import AuditError, audit_model, load_source
from search.priors.mapping import onset_and_late, rank_schedules
from search.priors.zones import Zone
from search.storage.records import ATTR_CHECKPOINT
from search.study import enqueue, family_for

PRIOR_FORMAT = "prism-prior/1"
ATTR_PRIOR = "prism.prior"
ATTR_AUDIT = "prism.audit"


# -- the prior file ----------------------------------------------------------------------------------------
def make_prior(profile: dict, config: StudyConfig, top_k: int = 4) -> dict:
    """Map a profile onto the study's family (see search.priors.mapping); the result is the prior file's JSON."""
    if profile["n_layer"] != config.model.n_layer:
        raise PriorError(
            f"the profile is of a {profile['n_layer']}-layer model, the study {config.name!r} has "
            f"model.n_layer={config.model.n_layer}; audit a model of the study's depth"
        )
    zones = [Zone(**z) for z in profile["zones"]]
    ranked = rank_schedules(family_for(config), config.baseline.heads[0], zones, top_k)
    onset, late = onset_and_late(zones)
    return {
        "format": PRIOR_FORMAT,
        "study": config.name,
        "family": config.space.family,
        "n_layer": config.model.n_layer,
        "baseline": str(config.baseline),
        "source": profile.get("source", ""),
        "onset": onset.to_dict() if onset else None,
        "late": late.to_dict() if late else None,
        "schedules": [r.to_dict() for r in ranked],
    }


def read_prior(path: str | Path, config: StudyConfig) -> dict:
    """A prior file checked against the study: its format, depth and every schedule's validity."""
    made_by = "`prism-search prior PROFILE.json STUDY.toml -o PRIOR.json` (or use --prior auto)"
    prior = read_versioned_json(path, PRIOR_FORMAT, "prior", made_by, PriorError)
    if prior.get("n_layer") != config.model.n_layer:
        raise PriorError(
            f"{path} is for {prior.get('n_layer')} layers, the study has model.n_layer={config.model.n_layer}; "
            "map a profile of the study's depth"
        )
    for entry in prior.get("schedules", []):
        try:
            validate(Schedule.parse(entry["schedule"]), config.model_config_)
        except ScheduleError as e:
            raise PriorError(f"{path}: prior schedule {entry['schedule']!r} does not fit the study ({e})") from None
    return prior


# -- seeding -----------------------------------------------------------------------------------------------
def is_seeded(study: optuna.Study) -> bool:
    return ATTR_PRIOR in study.user_attrs


def seed_study(study: optuna.Study, config: StudyConfig, prior: dict, profile: dict | None = None) -> list[str]:
    """Enqueue the prior's schedules (once per study) and store prior and profile; returns those enqueued."""
    if is_seeded(study):
        return []
    family = family_for(config)
    trials = study.get_trials(deepcopy=False)
    queued = {
        t.user_attrs.get("schedule")
        for t in trials
        if t.user_attrs.get("seed", config.seed) == config.seed and t.state in (TrialState.WAITING, TrialState.RUNNING, TrialState.COMPLETE)
    }
    added = []
    for entry in prior["schedules"]:
        if entry["schedule"] in queued:
            continue  # the baseline or a reference already measures it
        enqueue(study, family, Schedule.parse(entry["schedule"]), role="search", seed=config.seed, source="prior", prior_rank=entry["rank"])
        queued.add(entry["schedule"])
        added.append(entry["schedule"])
    narrow_until = len(study.get_trials(deepcopy=False)) + config.search.n_startup_trials  # trial numbers
    study.set_user_attr(ATTR_PRIOR, json.dumps(prior | {"narrow_until": narrow_until, "strength": config.search.prior_strength}))
    if profile is not None:
        study.set_user_attr(ATTR_AUDIT, json.dumps(profile))
    return added


class PriorSampler(optuna.samplers.BaseSampler):
    """The study's sampler, except that trials numbered below `narrow_until` are drawn near prior schedules."""

    def __init__(self, base: optuna.samplers.BaseSampler, anchors: list[dict[str, Any]], strength: float, narrow_until: int, seed: int = 0):
        self.base, self.anchors, self.strength, self.narrow_until, self.seed = base, anchors, strength, narrow_until, seed

    def _narrowing(self, trial: FrozenTrial) -> bool:
        return bool(self.anchors) and self.strength > 0 and trial.number < self.narrow_until

    def infer_relative_search_space(self, study, trial):
        return {} if self._narrowing(trial) else self.base.infer_relative_search_space(study, trial)

    def sample_relative(self, study, trial, search_space):
        return {} if self._narrowing(trial) else self.base.sample_relative(study, trial, search_space)

    def sample_independent(self, study, trial, param_name: str, param_distribution: BaseDistribution) -> Any:
        if self._narrowing(trial):
            rng = random.Random(f"{self.seed}:{trial.number}:{param_name}")  # reproducible per trial and parameter
            anchor = self.anchors[trial.number % len(self.anchors)]
            if param_name in anchor and rng.random() < self.strength:
                return _near(anchor[param_name], param_distribution, rng)
        return self.base.sample_independent(study, trial, param_name, param_distribution)

    def before_trial(self, study, trial) -> None:
        self.base.before_trial(study, trial)

    def after_trial(self, study, trial, state, values) -> None:
        self.base.after_trial(study, trial, state, values)

    def reseed_rng(self) -> None:
        self.base.reseed_rng()


def _near(value: Any, dist: BaseDistribution, rng: random.Random) -> Any:
    """`value` or one step away from it, uniformly, inside the distribution's range."""
    if isinstance(dist, IntDistribution):
        options = [v for v in (value - dist.step, value, value + dist.step) if dist.low <= v <= dist.high]
        return rng.choice(options or [value])
    if isinstance(dist, CategoricalDistribution) and value in dist.choices:
        i = dist.choices.index(value)
        return dist.choices[rng.choice([j for j in (i - 1, i, i + 1) if 0 <= j < len(dist.choices)])]
    return value


def narrow_sampler(study: optuna.Study, config: StudyConfig) -> None:
    """Wrap the study's sampler in a PriorSampler when the study was seeded with a prior (a no-op otherwise)."""
    if not is_seeded(study) or isinstance(study.sampler, PriorSampler):
        return
    prior = json.loads(study.user_attrs[ATTR_PRIOR])
    family = family_for(config)
    anchors = [
        family.params_for(Schedule.parse(e["schedule"])) for e in prior["schedules"] if family.contains(Schedule.parse(e["schedule"]))
    ]
    study.sampler = PriorSampler(study.sampler, anchors, prior["strength"], prior["narrow_until"], config.seed)


# -- --prior auto ------------------------------------------------------------------------------------------
def keeping_checkpoints(config: StudyConfig) -> StudyConfig:
    """The config the baselines of `--prior auto` run under: every trial keeps its checkpoint (the baseline's is
    audited). Later trials follow the study's own keep_checkpoints; with "best" the baseline's goes once beaten,
    its profile stays in the study (ATTR_AUDIT)."""
    # absolute: workers write from their own working directory (pydantic leaves the default unvalidated)
    return config.model_copy(update={"keep_checkpoints": "all", "checkpoint_dir": str(Path(config.checkpoint_dir).absolute())})


def paired_baseline(study: optuna.Study, config: StudyConfig) -> FrozenTrial:
    for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        if t.user_attrs.get("role") == "baseline" and t.user_attrs.get("seed") == config.seed:
            return t
    raise PriorError(f"study {config.name!r} has no finished baseline trial at seed {config.seed}; --prior auto needs one")


def prior_from_baseline(study: optuna.Study, config: StudyConfig, top_k: int = 4) -> dict:
    """Audit the paired baseline's checkpoint, map the profile, seed the study; returns the prior."""
    trial = paired_baseline(study, config)
    path = trial.user_attrs.get(ATTR_CHECKPOINT)
    if not path:
        raise AuditError(
            f"baseline trial {trial.number} of {config.name!r} kept no checkpoint; --prior auto needs "
            "the baseline trained by the same `run --prior auto`"
        )
    model, _ = load_source(str(path), config.storage)
    profile = audit_model(model, source=f"{config.name}:{trial.number}") | {"checkpoint": str(path)}
    prior = make_prior(profile, config, top_k)
    seed_study(study, config, prior, profile)
    return prior
