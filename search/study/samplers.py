"""Samplers by name, all seeded from the study seed; `grid` walks the family's own enumeration.

Optuna's GridSampler takes the product of parameter values, which for the sorted-switch encodings visits the same
schedule many times. `ScheduleGridSampler` instead hands out each member of the family once, in the family's
deterministic order, by giving every sampled trial the next unclaimed index (stored as a system attr, so
resumed runs and several drivers continue the walk). Enqueued trials (baseline, references, retries) keep their
fixed params; their schedules reappear in the walk and are then served by the duplicate cache.

`DistinctSampler` wraps every other sampler: it draws a whole proposal at once and draws again while it decodes to a
schedule the study trains, trained or queued at the search seed; concurrent workers then get distinct schedules
while the space has untried ones (the duplicate cache serves a taken schedule only once the space runs short).

`PriorSampler` narrows a prior-seeded study's first `search.n_startup_trials` proposals: each parameter, with
probability prior_strength, is taken from a prior schedule's encoding (trials cycle through the priors) and
moved by at most one step; otherwise the study's own sampler draws it. After that the study's sampler runs
unchanged, learning from every trial, prior or not.

`UniformSampler` (`random`) draws each proposal uniformly among the family's untried members. Optuna's RandomSampler
draws the encoding's parameters instead, and an encoding with several vectors per schedule weighs schedules unequally:
ramp's sorted switches give a schedule whose switches coincide (`1x5,4x1`: 1 of 49 vectors) half the mass of most
others (2 of 49), so a "random" search would be a biased one.

`AdditiveSampler` (`additive`) learns the structure of the space: per-layer head counts act nearly additively on val
loss (an additive one-hot model explains about 90% of bench-main's schedule-effect variance), so after its random
starts it fits a Bayesian ridge regression of the loss on one indicator per (layer, head count) plus one per seed
(a seed block: baselines and confirmations run at other seeds) and proposes the untried schedule of the family with
the lowest lower confidence bound at the search seed. A share of its proposals (`search.explore`) is drawn at random
among the untried schedules, so that a winner the model ranks low is still found.
"""

from __future__ import annotations

import random
from typing import Any, cast

import numpy as np
import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution, IntDistribution
from optuna.trial import FixedTrial, FrozenTrial, TrialState

from prism import Schedule
from search.attrs import FAILED_ITSELF, GRID_INDEX, SCHEDULE, SEED
from search.config import StudyConfig
from search.errors import GridExhausted
from search.families import ScheduleFamily
from search.storage import is_enqueued, storage_of, trial_id, whole_study


class ScheduleGridSampler(optuna.samplers.BaseSampler):
    """Every schedule of `family` once, in `family.enumerate()` order."""

    def __init__(self, family: ScheduleFamily):
        self.family = family
        self.schedules = list(family.enumerate())

    def claimed(self, study: optuna.Study) -> set[int]:
        return {t.system_attrs[GRID_INDEX] for t in study.get_trials(deepcopy=False) if GRID_INDEX in t.system_attrs}

    def before_trial(self, study: optuna.Study, trial: FrozenTrial) -> None:
        if is_enqueued(trial):
            return
        claimed = self.claimed(study)
        index = next((i for i in range(len(self.schedules)) if i not in claimed), None)
        if index is None:
            raise GridExhausted(f"the grid has visited all {len(self.schedules)} schedules of the {self.family.name!r} space")
        storage_of(study).set_trial_system_attr(trial_id(trial), GRID_INDEX, index)

    def infer_relative_search_space(self, study: optuna.Study, trial: FrozenTrial) -> dict[str, BaseDistribution]:
        return {}

    def sample_relative(self, study, trial, search_space) -> dict[str, Any]:
        return {}

    def sample_independent(self, study: optuna.Study, trial: FrozenTrial, param_name: str, param_distribution) -> Any:
        schedule = self.schedules[trial.system_attrs[GRID_INDEX]]
        return self.family.params_for(schedule)[param_name]


def make_sampler(config: StudyConfig, family: ScheduleFamily) -> optuna.samplers.BaseSampler:
    """The sampler `config` names, drawing schedules of `family` (the space the config declares)."""
    s = config.search
    match s.sampler:
        case "random":
            base: optuna.samplers.BaseSampler = UniformSampler(family, config.seed)
        case "gp":
            base = optuna.samplers.GPSampler(seed=config.seed, n_startup_trials=s.n_startup_trials)
        case "nsga2":
            base = optuna.samplers.NSGAIISampler(seed=config.seed, population_size=s.population_size)
        case "grid":
            return ScheduleGridSampler(family)  # hands out each member once by itself
        case "additive":
            base = AdditiveSampler(family, config.seed, s.n_startup_trials, s.explore)
        case _:
            base = optuna.samplers.TPESampler(seed=config.seed, n_startup_trials=s.n_startup_trials)
    return DistinctSampler(base, family, config.seed)


def family_space(family: ScheduleFamily) -> dict[str, BaseDistribution]:
    """What `family.suggest` draws, by name: a FixedTrial answers suggest_* as a Trial does, and records them."""
    probe = FixedTrial(family.params_for(next(family.enumerate())))
    family.suggest(cast(optuna.Trial, probe))
    return dict(probe.distributions)


def taken_schedules(study: optuna.Study, seed: int) -> set[str]:
    """Schedules trained, training or queued at `seed`, and those that failed by their own error at any seed:
    proposing one again buys no new training run. Read from the
    whole study: under Hyperband a sampler is handed one bracket's view, and the other brackets' schedules are taken
    too (the quickstart served `1x1,2x3` twice with 8 of its 15 schedules trained)."""
    live = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING, TrialState.WAITING)
    trials = whole_study(study).get_trials(deepcopy=False, states=(*live, TrialState.FAIL))
    return {
        t.user_attrs[SCHEDULE]
        for t in trials
        if SCHEDULE in t.user_attrs
        and ((t.state in live and t.user_attrs.get(SEED) == seed) or (t.state == TrialState.FAIL and t.user_attrs.get(FAILED_ITSELF)))
    }


class _Wrapper(optuna.samplers.BaseSampler):
    """A sampler around `base`: every call goes to `base` unless the subclass changes it."""

    base: optuna.samplers.BaseSampler

    def infer_relative_search_space(self, study, trial) -> dict[str, BaseDistribution]:
        return self.base.infer_relative_search_space(study, trial)

    def sample_relative(self, study, trial, search_space) -> dict[str, Any]:
        return self.base.sample_relative(study, trial, search_space)

    def sample_independent(self, study, trial, param_name: str, param_distribution: BaseDistribution) -> Any:
        return self.base.sample_independent(study, trial, param_name, param_distribution)

    def before_trial(self, study, trial) -> None:
        self.base.before_trial(study, trial)

    def after_trial(self, study, trial, state, values) -> None:
        self.base.after_trial(study, trial, state, values)

    def reseed_rng(self) -> None:
        self.base.reseed_rng()


class DistinctSampler(_Wrapper):
    """`base`'s proposals, never a taken schedule (`taken_schedules` at the search seed) while the space has others.

    Why it is needed: the encodings map several parameter vectors to one schedule (ramp's sorted switches: 25
    vectors for 15 schedules in the quickstart space), independent draws collide by chance (RandomSampler and TPE's
    startup at seed 0 draw switches (2, 3), (3, 2), (2, 3): one schedule three times), and TPE's constant liar only
    makes a running trial's region less likely, never excluded. So W concurrent asks got the same schedule, and the
    duplicate cache served the copies instead of training W schedules.

    The proposal is drawn whole in `sample_relative` (the family's parameters as the relative search space, each
    one from `base`'s relative or independent draw), decoded, and drawn again up to REDRAWS times while it is
    taken; then the untried schedule nearest the last draw (in parameters: a prior's narrowing or TPE's pull stays
    near; ties broken at random, seeded by the trial number). Only when none is left is a taken one returned, and
    the duplicate cache serves it.
    """

    REDRAWS = 8

    def __init__(self, base: optuna.samplers.BaseSampler, family: ScheduleFamily, seed: int):
        self.base, self.family, self.seed = base, family, seed
        self.space = family_space(family)

    def infer_relative_search_space(self, study: optuna.Study, trial: FrozenTrial) -> dict[str, BaseDistribution]:
        return self.space

    def sample_relative(self, study: optuna.Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]) -> dict[str, Any]:
        taken = taken_schedules(study, self.seed)
        params: dict[str, Any] = {}
        for _ in range(self.REDRAWS):
            previous, params = params, self._draw(study, trial)
            if str(self.decode(params)) not in taken:
                return params
            if params == previous:
                break  # a deterministic proposal (GP's acquisition optimum): drawing again repeats it
        untried = [self.family.params_for(s) for s in self.family.enumerate() if str(s) not in taken]
        if not untried:
            return params  # the space runs short: the duplicate cache serves it
        rng = random.Random(f"{self.seed}:{trial.number}")
        return min(untried, key=lambda u: (sum(abs(u[k] - params[k]) for k in u), rng.random()))

    def _draw(self, study: optuna.Study, trial: FrozenTrial) -> dict[str, Any]:
        relative = self.base.sample_relative(study, trial, self.base.infer_relative_search_space(study, trial))
        return {
            name: relative[name] if name in relative else self.base.sample_independent(study, trial, name, dist)
            for name, dist in self.space.items()
        }

    def decode(self, params: dict[str, Any]) -> Schedule:
        return self.family.suggest(cast(optuna.Trial, FixedTrial(params)))


def reachable_target(study: optuna.Study, target: int) -> int:
    """A grid study ends when its walk does: cap `target` at what the queue and the unclaimed schedules allow."""
    if not isinstance(study.sampler, ScheduleGridSampler):
        return target
    trials = study.get_trials(deepcopy=False)
    live = sum(t.state in (TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING, TrialState.WAITING) for t in trials)
    return min(target, live + len(study.sampler.schedules) - len(study.sampler.claimed(study)))


class PriorSampler(_Wrapper):
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


def narrowed(
    sampler: optuna.samplers.BaseSampler, anchors: list[dict[str, Any]], strength: float, narrow_until: int, seed: int
) -> optuna.samplers.BaseSampler:
    """`sampler` with its early draws narrowed by a prior (once). Distinctness stays outermost, so a narrowed draw
    that is taken is drawn again."""
    if isinstance(sampler, DistinctSampler):
        return DistinctSampler(narrowed(sampler.base, anchors, strength, narrow_until, seed), sampler.family, sampler.seed)
    return sampler if isinstance(sampler, PriorSampler) else PriorSampler(sampler, anchors, strength, narrow_until, seed)


def _near(value: Any, dist: BaseDistribution, rng: random.Random) -> Any:
    """`value` or one step away from it, uniformly, inside the distribution's range."""
    if isinstance(dist, IntDistribution):
        options = [v for v in (value - dist.step, value, value + dist.step) if dist.low <= v <= dist.high]
        return rng.choice(options or [value])
    if isinstance(dist, CategoricalDistribution) and value in dist.choices:
        i = dist.choices.index(value)
        return dist.choices[rng.choice([j for j in (i - 1, i, i + 1) if 0 <= j < len(dist.choices)])]
    return value


class UniformSampler(optuna.samplers.BaseSampler):
    """Each proposal a member of the family drawn uniformly among the untried ones (trained, training or queued at the
    search seed are taken); when none is left, any member (the duplicate cache serves it). Proposals are whole
    schedules: the relative search space is the family's parameters."""

    def __init__(self, family: ScheduleFamily, seed: int):
        self.family, self.seed = family, seed
        self.schedules = list(family.enumerate())
        self.names = [str(s) for s in self.schedules]
        self._random = optuna.samplers.RandomSampler(seed=seed)
        self.space = family_space(family)

    def infer_relative_search_space(self, study: optuna.Study, trial: FrozenTrial) -> dict[str, BaseDistribution]:
        return self.space

    def sample_relative(self, study: optuna.Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]) -> dict[str, Any]:
        if not search_space:
            return {}
        return self.family.params_for(self.propose(study, trial.number))

    def sample_independent(self, study: optuna.Study, trial: FrozenTrial, param_name: str, param_distribution: BaseDistribution) -> Any:
        return self._random.sample_independent(study, trial, param_name, param_distribution)

    def reseed_rng(self) -> None:
        self._random.reseed_rng()

    def untried(self, study: optuna.Study) -> list[Schedule]:
        taken = taken_schedules(study, self.seed)
        return [s for s, name in zip(self.schedules, self.names, strict=True) if name not in taken] or self.schedules

    def propose(self, study: optuna.Study, number: int) -> Schedule:
        """The schedule for trial `number`, reproducible per trial whatever ran before."""
        return random.Random(f"{self.seed}:{number}").choice(self.untried(study))


class AdditiveSampler(UniformSampler):
    """Random starts, then the untried schedule whose loss an additive model of per-layer head counts bounds lowest.

    The model sees every complete trial that names its schedule and seed (or whose parameters decode to a schedule:
    then at the search seed), its first objective (val loss). Proposals are whole schedules of the family (the relative
    search space is the family's parameters), never one trained, training or queued at the search seed while an
    untried one is left; when none is left, a random one (the duplicate cache serves it). `make_sampler` still wraps
    it in `DistinctSampler`, so a prior's narrowing keeps its distinctness.
    """

    KAPPA = 1.0  # the lower confidence bound: posterior mean - KAPPA * predictive sd

    def __init__(self, family: ScheduleFamily, seed: int, n_startup_trials: int, explore: float):
        super().__init__(family, seed)
        self.n_startup_trials, self.explore = n_startup_trials, explore
        from sklearn.preprocessing import OneHotEncoder  # sklearn loads for this sampler only: status and the dashboard import search.study

        self._layers = OneHotEncoder(categories=[family.counts] * family.n_layer, handle_unknown="ignore", sparse_output=False)
        self._layers.fit([[family.counts[0]] * family.n_layer])
        self._encoded = dict(zip(self.names, self._layers.transform([s.heads for s in self.schedules]), strict=True))

    def propose(self, study: optuna.Study, number: int) -> Schedule:
        """The schedule for trial `number`: random while starting or exploring, else the lowest lower bound."""
        rng = random.Random(f"{self.seed}:{number}")  # reproducible per trial, whatever ran before
        untried = self.untried(study)
        observed = self.observed(study)
        explore = rng.random() < self.explore
        if len(observed) < max(self.n_startup_trials, 2) or explore:
            return rng.choice(untried)
        bounds = self.lower_bounds(observed, untried)
        return untried[min(range(len(untried)), key=lambda i: (bounds[i], rng.random()))]

    def observed(self, study: optuna.Study) -> list[tuple[Schedule, int, float]]:
        """(schedule, seed, val loss) of every complete trial of the whole study."""
        out = []
        for t in whole_study(study).get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
            if not t.values:
                continue
            if SCHEDULE in t.user_attrs:
                schedule = Schedule.parse(t.user_attrs[SCHEDULE])
            elif set(self.space) <= set(t.params):
                schedule = self.family.suggest(cast(optuna.Trial, FixedTrial({k: t.params[k] for k in self.space})))
            else:
                continue
            out.append((schedule, int(t.user_attrs.get(SEED, self.seed)), float(t.values[0])))
        return out

    def lower_bounds(self, observed: list[tuple[Schedule, int, float]], candidates: list[Schedule]) -> list[float]:
        """Posterior mean - KAPPA * predictive sd of each candidate's loss at the search seed."""
        seeds = np.array(sorted({seed for _, seed, _ in observed} | {self.seed}))

        def rows(items: list[tuple[Schedule, int]]) -> np.ndarray:
            layers = np.array(
                [self._encoded[str(s)] if str(s) in self._encoded else self._layers.transform([s.heads])[0] for s, _ in items]
            )
            return np.hstack([layers, np.array([seed for _, seed in items])[:, None] == seeds[None, :]])

        from sklearn.linear_model import BayesianRidge

        model = BayesianRidge().fit(rows([(s, seed) for s, seed, _ in observed]), [y for *_, y in observed])
        mean, sd = model.predict(rows([(s, self.seed) for s in candidates]), return_std=True)
        return list(mean - self.KAPPA * sd)
