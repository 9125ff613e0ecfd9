"""What a verdict costs: a budget forecast before any compute (`prism-search plan`), and what deciding an undecided
study would cost (its summary).

The seeds a verdict at the margin needs are the verdict's own count (search.analysis.stats.pairs_needed: a paired t
that detects the margin with 80% power at 0.05), from the sd of one paired difference. The runs are those of the
default strategy: the search at the study seed (`n_trials`, or the whole space where it is smaller), then
`prism-search confirm --top K --seeds N`, which trains K schedules and uniform on N fresh seeds. Hours are training
hours, one run after another, at a stated, stored or measured tokens/s. Values only: the CLI writes the words.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import optuna
from optuna.trial import FrozenTrial, TrialState

from search.analysis.blocked import Fit, ManyToOne, many_to_one
from search.analysis.budget import is_served
from search.analysis.stats import Contrast, pairs_needed
from search.analysis.verdict import MAX_CONFIRM, Verdict
from search.attrs import ROLE, ROLE_CONFIRM, SCHEDULE, SEED, TOKENS_PER_S
from search.config import StudyConfig

CONFIRM_TOP = MAX_CONFIRM  # `confirm --top`'s default (search.Study.confirm), the most schedules a verdict names

# where the sd of one paired difference came from
NOISE_STATED = "stated"  # --sd
NOISE_PAIRED = "paired"  # a stored study's paired differences (ManyToOne.sd_pair: the blocked model's where it fits)
# sqrt(2) x uniform's sd across its seeds, where no schedule has paired seeds yet: an upper bound, since that sd still
# holds each seed's own luck, which pairing removes
NOISE_UNIFORM = "uniform"

SPEED_STATED = "stated"  # --tokens-per-s
SPEED_STORED = "stored"  # the pilot's median stored tokens/s per run (the machines it ran on)
SPEED_MEASURED = "measured"  # timed here, on the config's uniform model


@dataclass(frozen=True)
class Noise:
    """The sd of one paired difference (schedule minus uniform at one seed), and where it came from."""

    sd_pair: float
    source: str  # NOISE_STATED | NOISE_PAIRED | NOISE_UNIFORM
    study: str | None = None  # the stored study it was measured on
    df: int | None = None  # its degrees of freedom (the blocked model's residual df, or seeds - 1 of uniform)
    method: Fit | None = None  # NOISE_PAIRED: how the family was fitted (ManyToOne.method)


@dataclass(frozen=True)
class Speed:
    """Training tokens/s of one run, and where the figure came from."""

    tokens_per_s: float
    source: str  # SPEED_STATED | SPEED_STORED | SPEED_MEASURED
    study: str | None = None  # SPEED_STORED: the pilot
    runs: int = 0  # SPEED_STORED: the runs whose median it is
    steps: int = 0  # SPEED_MEASURED: the timed steps (after `warmup` untimed ones)
    warmup: int = 0
    threads: int = 0  # SPEED_MEASURED: torch threads, as a study's worker uses (resources.cpus_per_trial)
    device: str = ""
    schedule: str = ""  # SPEED_MEASURED: the model timed (the config's uniform baseline)


@dataclass(frozen=True)
class Cost:
    """Training runs and tokens, and the hours they take one after another at `tokens_per_s` (None: no speed)."""

    runs: int
    tokens: int
    tokens_per_s: float | None
    hours: float | None


def cost(runs: int, tokens_per_run: int, tokens_per_s: float | None) -> Cost:
    tokens = runs * tokens_per_run
    return Cost(runs, tokens, tokens_per_s, tokens / tokens_per_s / 3600 if tokens_per_s else None)


@dataclass(frozen=True)
class Forecast:
    """What a verdict at `margin` costs with the default strategy, before any compute."""

    study: str
    margin: float
    noise: Noise
    pairs: int | None  # paired seeds per schedule that resolve the margin; None: more than pairs_needed's cap
    resolution: float | None  # the gap `pairs` seeds detect with 80% power (at most the margin)
    search_runs: int  # the search at the study seed, baseline and reference runs included
    n_trials: int
    space: int  # schedules in the config's space
    top: int  # K of `confirm --top K`
    confirm_runs: int | None  # (K + 1) x pairs: the K schedules and uniform on `pairs` fresh seeds
    tokens_per_run: int
    workers: int  # resources.workers: runs trained at once
    speed: Speed | None  # None: no figure (a GPU config with no GPU here and none stated)
    total: Cost | None  # None when the margin is below what seeds resolve
    # search.confirmation = "rounds": the confirmation is the study's own two rounds (round 1: `top` and uniform on one
    # seed; round 2: the frozen pick and uniform on `pairs` seeds), `resolution` is what its test detects on its
    # pooled residual df (`rounds_df`), and `needed` the paired seeds the margin would need
    rounds: bool = False
    rounds_df: int | None = None
    needed: int | None = None


def tokens_per_run(config: StudyConfig) -> int:
    return config.train.steps * config.train.batch_size * config.model.block_size


def search_runs(config: StudyConfig) -> int:
    """`n_trials` counts the search's trained runs; a space smaller than that is exhausted first. The baseline and
    references queued at the other baseline seeds are runs beyond the space's one seed."""
    extra_seeds = config.search.baseline_seeds - 1
    return min(config.n_trials, config.family.size() + extra_seeds * (1 + len(config.space.references)))


def forecast(config: StudyConfig, noise: Noise, margin: float, speed: Speed | None) -> Forecast:
    """The forecast for `config` at `margin`: seeds from the noise, runs from the study's confirmation (its rounds,
    or `confirm --top K` on the seeds the margin needs)."""
    needed = pairs_needed(noise.sd_pair, margin)
    per_run = tokens_per_run(config)
    searched = search_runs(config)
    rounds = config.search.confirmation == "rounds"
    pairs: int | None
    df: int | None
    if rounds:
        top, pairs = min(config.search.confirm_top, config.family.size() - 1), config.search.confirm_seeds
        confirm_runs: int | None = top + 1 + 2 * pairs
        df = rounds_df(config, searched, top)
    else:
        top, pairs = min(CONFIRM_TOP, config.family.size() - 1), needed
        confirm_runs = None if pairs is None else (top + 1) * pairs
        df = None if pairs is None else pairs - 1
    return Forecast(
        study=config.name,
        margin=margin,
        noise=noise,
        pairs=pairs,
        resolution=None if pairs is None or df is None else Contrast(pairs, 0.0, noise.sd_pair / math.sqrt(pairs), df).detectable(),
        search_runs=searched,
        n_trials=config.n_trials,
        space=config.family.size(),
        top=top,
        confirm_runs=confirm_runs,
        tokens_per_run=per_run,
        workers=config.resources.workers,
        speed=speed,
        total=None if confirm_runs is None else cost(searched + confirm_runs, per_run, speed.tokens_per_s if speed else None),
        rounds=rounds,
        rounds_df=df if rounds else None,
        needed=needed,
    )


def rounds_df(config: StudyConfig, searched: int, top: int) -> int:
    """The residual df of round 2's test: the blocked model over every run, the pick's round-2 runs as a schedule of
    their own. Runs less one parameter per schedule and per seed, plus one: the search seed's schedules (each run
    once), uniform and the references at the other baseline seeds, round 1's seed and round 2's."""
    extra_seeds = config.search.baseline_seeds - 1
    extra_runs = extra_seeds * (1 + len(config.space.references))
    schedules = searched - extra_runs + 1  # the pick's round-2 runs are one more
    seeds = 1 + extra_seeds + 1 + config.search.confirm_seeds
    runs = searched + top + 1 + 2 * config.search.confirm_seeds
    return max(1, runs - schedules - seeds + 1)


def measured_noise(runs: Mapping[tuple[str, int], float], baseline: str, study: str) -> Noise | None:
    """The noise a stored study measured: its paired differences' sd where some schedule has paired seeds (the
    blocked model's where it fits), else sqrt(2) x uniform's sd across its seeds; None with neither."""
    family: ManyToOne = many_to_one(runs, baseline)
    if family.sd_pair:
        df = family.residual_df if family.residual_df is not None else _paired_df(family)
        return Noise(family.sd_pair, NOISE_PAIRED, study, df, family.method)
    uniform = [v for (schedule, _), v in runs.items() if schedule == baseline]
    if len(uniform) >= 2 and (sd := statistics.stdev(uniform)) > 0:
        return Noise(math.sqrt(2) * sd, NOISE_UNIFORM, study, len(uniform) - 1)
    return None


def _paired_df(family: ManyToOne) -> int:
    """The df behind a pooled per-schedule spread: the sum of each measured schedule's n - 1."""
    return sum(g.contrast.df for g in family.gaps if g.contrast.measured)


def median_tokens_per_s(trials: Iterable[FrozenTrial]) -> tuple[float, int] | None:
    """The median stored tokens/s of the complete runs that trained (a served duplicate trained nothing), and how
    many runs it is the median of; None where none recorded one."""
    speeds = [
        float(t.user_attrs[TOKENS_PER_S])
        for t in trials
        if t.state == TrialState.COMPLETE and not is_served(t) and t.user_attrs.get(TOKENS_PER_S)
    ]
    return (statistics.median(speeds), len(speeds)) if speeds else None


def pilot_speed(study: optuna.Study, pilot: StudyConfig, config: StudyConfig) -> Speed | None:
    """The pilot's stored speed, where its runs are the same work as `config`'s (the same model, batch, threads and
    device kind): another model's tokens/s says nothing about this one's."""
    same = (
        pilot.model_config_ == config.model_config_
        and pilot.train.batch_size == config.train.batch_size
        and pilot.resources.cpus_per_trial == config.resources.cpus_per_trial
        and (pilot.resources.gpus_per_trial > 0) == (config.resources.gpus_per_trial > 0)
    )
    stored = median_tokens_per_s(study.get_trials(deepcopy=False)) if same else None
    return Speed(stored[0], SPEED_STORED, study.study_name, runs=stored[1]) if stored else None


def deciding_cost(
    verdict: Verdict, baseline: str, ranking: list[str], held: Mapping[str, int], per_run: int, tokens_per_s: float | None
) -> Cost | None:
    """What the undecided verdict's next confirmation (`confirm --top K --seeds N`) still has to train: uniform and
    the first K of `ranking` (the schedules other than uniform, in the order `confirm --top` takes them) on N
    confirmation seeds, less those each already ran (`held`: confirmation seeds per schedule; confirm takes its seeds
    from the first on, so the held ones are among the N). None for a verdict that is not undecided or names none."""
    if verdict.kind != "undecided" or verdict.next is None:
        return None
    schedules = [baseline, *ranking[: verdict.next.top]]
    runs = sum(max(0, verdict.next.seeds - held.get(s, 0)) for s in schedules)
    return cost(runs, per_run, tokens_per_s)


def study_deciding_cost(verdict: Verdict, family: ManyToOne, trials: list[FrozenTrial], config: StudyConfig) -> Cost | None:
    """`deciding_cost` of a stored study's verdict, read from its trials, at its own median tokens/s per run."""
    held: dict[str, set[int]] = {}
    for t in trials:
        if t.state == TrialState.COMPLETE and t.user_attrs.get(ROLE) == ROLE_CONFIRM and SCHEDULE in t.user_attrs:
            held.setdefault(t.user_attrs[SCHEDULE], set()).add(t.user_attrs[SEED])
    speed = median_tokens_per_s(trials)
    ranking = [g.schedule for g in family.gaps]
    counts = {s: len(seeds) for s, seeds in held.items()}
    return deciding_cost(verdict, str(config.baseline), ranking, counts, tokens_per_run(config), speed[0] if speed else None)
