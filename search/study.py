"""Studies in the database: creation with everything needed to resume, and the summary users read.

A study stores its full validated config and its corpus fingerprint as study user attrs, so `resume NAME`
needs no TOML and refuses a corpus that changed. The uniform baseline is enqueued first, once per
`baseline_seeds`; the first baseline uses the study seed like every search trial, so its gap to any schedule
is a paired comparison, and the spread across baseline seeds is the study's noise floor.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import asdict, dataclass

import optuna
from optuna.trial import FrozenTrial, TrialState

from prism import CorpusError, Schedule, allowed_head_counts, load_corpus
from search.config import ConfigError, PrismSearchError, StudyConfig
from search.families import ScheduleFamily, make_family

ATTR_CONFIG = "prism.config"
ATTR_FINGERPRINT = "prism.corpus_fingerprint"
FINISHED = (TrialState.COMPLETE, TrialState.PRUNED)

optuna.logging.set_verbosity(optuna.logging.WARNING)


def family_for(config: StudyConfig) -> ScheduleFamily:
    return make_family(config.space.family, config.model.n_layer, allowed_head_counts(config.model_config_))


def make_sampler(config: StudyConfig) -> optuna.samplers.BaseSampler:
    if config.search.sampler == "random":
        return optuna.samplers.RandomSampler(seed=config.seed)
    return optuna.samplers.TPESampler(seed=config.seed, n_startup_trials=config.search.n_startup_trials)


def make_pruner(config: StudyConfig) -> optuna.pruners.BasePruner:
    """Pruner budgets are in training tokens, the unit every trial reports its intermediate values in."""
    tokens_per_eval = config.train.eval_every * config.train.batch_size * config.model.block_size
    min_resource = config.search.min_resource_evals * tokens_per_eval
    max_resource = config.train.steps * config.train.batch_size * config.model.block_size
    factor = config.search.reduction_factor
    match config.search.pruner:
        case "hyperband":
            return optuna.pruners.HyperbandPruner(min_resource=min_resource, max_resource=max_resource, reduction_factor=factor)
        case "successive-halving":
            return optuna.pruners.SuccessiveHalvingPruner(min_resource=min_resource, reduction_factor=factor)
        case "median":
            return optuna.pruners.MedianPruner(n_startup_trials=config.search.n_startup_trials, n_warmup_steps=min_resource)
        case _:
            return optuna.pruners.NopPruner()


def stored_config(study: optuna.Study) -> StudyConfig:
    raw = study.user_attrs.get(ATTR_CONFIG)
    if raw is None:
        raise PrismSearchError(f"study {study.study_name!r} was not created by prism-search (no stored config)")
    return StudyConfig.model_validate(json.loads(raw))


def _comparable(config: StudyConfig) -> dict:
    """The parts of a config that must not change over a study's life (trial count, storage, workers may)."""
    return config.model_dump(exclude={"n_trials", "storage", "resources", "keep_checkpoints", "checkpoint_dir"})


def load_study(name: str, storage: optuna.storages.BaseStorage) -> optuna.Study:
    try:
        probe = optuna.load_study(study_name=name, storage=storage)
    except KeyError:
        names = ", ".join(s.study_name for s in optuna.get_all_study_summaries(storage)) or "none"
        raise PrismSearchError(f"no study named {name!r} in this storage (studies: {names}); check the name or --storage") from None
    config = stored_config(probe)
    return optuna.load_study(study_name=name, storage=storage, sampler=make_sampler(config), pruner=make_pruner(config))


def open_study(config: StudyConfig, storage: optuna.storages.BaseStorage, fingerprint: str) -> optuna.Study:
    """Create the study (baseline and references enqueued) or reopen it after checking nothing drifted."""
    study = optuna.create_study(
        study_name=config.name, storage=storage, direction="minimize", load_if_exists=True,
        sampler=make_sampler(config), pruner=make_pruner(config),
    )
    if ATTR_CONFIG in study.user_attrs:
        previous = stored_config(study)
        if _comparable(previous) != _comparable(config):
            raise PrismSearchError(
                f"study {config.name!r} exists with a different model/space/train/data/search config; "
                f"use `prism-search resume {config.name}` or give the study a new name"
            )
        if study.user_attrs.get(ATTR_FINGERPRINT) != fingerprint:
            raise PrismSearchError(
                f"study {config.name!r} was trained on a corpus with fingerprint "
                f"{study.user_attrs.get(ATTR_FINGERPRINT)}, this one has {fingerprint}; use a new study name"
            )
        return study
    study.set_user_attr(ATTR_CONFIG, config.model_dump_json())
    study.set_user_attr(ATTR_FINGERPRINT, fingerprint)
    study.set_metric_names(["val_loss"])
    family = family_for(config)
    for k in range(config.search.baseline_seeds):
        enqueue(study, family, config.baseline, role="baseline", seed=config.seed + k)
    for text in config.space.references:
        enqueue(study, family, Schedule.parse(text), role="reference", seed=config.seed)
    return study


def enqueue(study: optuna.Study, family: ScheduleFamily, schedule: Schedule, *, role: str, seed: int, **attrs) -> None:
    """Queue a schedule. A schedule outside the family still runs; its params are then left to the sampler."""
    params = family.params_for(schedule) if family.contains(schedule) else {}
    study.enqueue_trial(params, user_attrs={"role": role, "seed": seed, "schedule": str(schedule), **attrs})


def corpus_fingerprint(config: StudyConfig) -> str:
    """Load the corpus once up front, so a bad corpus fails here with one line, before Ray or the database."""
    try:
        corpus = load_corpus(config.data.corpus, config.data.val_fraction, **config.data.corpus_options())
    except CorpusError as e:
        raise ConfigError(f"data.corpus: {e}") from None
    if corpus.vocab_size > config.model.vocab_size:
        raise ConfigError(
            f"model.vocab_size={config.model.vocab_size} is smaller than the corpus vocab {corpus.vocab_size}; "
            f"set model.vocab_size = {corpus.vocab_size}"
        )
    return corpus.fingerprint


@dataclass
class Summary:
    name: str
    counts: dict[str, int]
    best_schedule: str | None
    best_value: float | None
    best_number: int | None
    baseline_schedule: str
    baseline_value: float | None  # paired baseline: same seed as every search trial
    noise_sd: float | None  # std of the baseline's val loss across seeds
    gap: float | None  # best - baseline (negative = better than uniform)
    gap_sigma: float | None  # gap in units of the difference's noise, sqrt(2) * noise_sd
    n_trials: int

    def to_dict(self) -> dict:
        return asdict(self)

    def gap_text(self) -> str:
        if self.gap is None:
            return "n/a"
        if self.noise_sd is None or self.gap_sigma is None:
            return f"{self.gap:+.4f} (noise unknown: needs >= 2 finished baseline seeds)"
        verdict = "" if abs(self.gap_sigma) >= 2 else ", inside the noise"
        return f"{self.gap:+.4f} ± {math.sqrt(2) * self.noise_sd:.4f} ({self.gap_sigma:+.1f} σ{verdict})"


def summarize(study: optuna.Study) -> Summary:
    config = stored_config(study)
    trials = study.get_trials(deepcopy=False)
    counts = {s.name: 0 for s in TrialState}
    for t in trials:
        counts[t.state.name] += 1
    complete = [t for t in trials if t.state == TrialState.COMPLETE and t.value is not None]
    # best among trials at the study seed only: baseline repeats at other seeds measure noise, they don't compete
    paired_set = [t for t in complete if t.user_attrs.get("seed", config.seed) == config.seed]
    best: FrozenTrial | None = min(paired_set, key=lambda t: t.value, default=None)
    baselines = [t for t in complete if t.user_attrs.get("role") == "baseline"]
    paired = next((t.value for t in baselines if t.user_attrs.get("seed") == config.seed), None)
    noise = statistics.stdev([t.value for t in baselines]) if len(baselines) >= 2 else None
    gap = best.value - paired if best is not None and paired is not None else None
    sigma = gap / (math.sqrt(2) * noise) if gap is not None and noise else None
    return Summary(
        name=study.study_name,
        counts={k: v for k, v in counts.items() if v},
        best_schedule=best.user_attrs.get("schedule") if best else None,
        best_value=best.value if best else None,
        best_number=best.number if best else None,
        baseline_schedule=str(config.baseline),
        baseline_value=paired,
        noise_sd=noise,
        gap=gap,
        gap_sigma=sigma,
        n_trials=config.n_trials,
    )
