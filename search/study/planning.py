"""`prism-search plan`: what a study's verdict at its margin would cost, before any compute.

The noise comes from a stated sd, or from a stored pilot (the study's own stored runs, or another study's); the
speed from a stated figure, the pilot's stored runs (when they are the same work), or a short timed training of the
config's uniform model here. The arithmetic is search.analysis.forecast's; torch loads only to time a model.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from search.analysis.forecast import (
    NOISE_STATED,
    SPEED_MEASURED,
    SPEED_STATED,
    Forecast,
    Noise,
    Speed,
    forecast,
    measured_noise,
    pilot_speed,
)
from search.analysis.stored import is_stored, stored_study
from search.analysis.summary import study_runs
from search.config import StudyConfig
from search.errors import ConfigError, PrismSearchError
from search.outputs.urls import mask_url
from search.storage.records import stored_config

if TYPE_CHECKING:
    import optuna

TIMED_STEPS = 30  # steps timed for the speed, after WARMUP_STEPS untimed ones (allocation, the first kernels)
WARMUP_STEPS = 5


def check_flags(*, noise_from: str | None, sd: float | None, margin: float | None, tokens_per_s: float | None) -> None:
    """`plan`'s stated figures, checked before its config is read."""
    for flag, value, what in (
        ("--sd", sd, "the sd of one paired difference, in nats"),
        ("--margin", margin, "the gap to uniform too small to matter, in nats"),
        ("--tokens-per-s", tokens_per_s, "training tokens per second of one run"),
    ):
        if value is not None and not value > 0:  # NaN too
            raise ConfigError(f"{flag} {value}: must be above 0 (fix: {flag} is {what})")
    if sd is not None and noise_from is not None:
        raise ConfigError("--sd and --noise-from both give the noise (fix: pass one of them)")


def forecast_study(
    config: StudyConfig, source: str, *, noise_from: str | None, sd: float | None, margin: float | None, tokens_per_s: float | None
) -> Forecast:
    """The forecast for the study `config` (read from `source`). Noise: `sd` (the sd of one paired difference), else
    the stored study `noise_from`, else the config's own study if stored. Speed: `tokens_per_s`, else the pilot's
    stored median when it trained the same model, else timed here (on CUDA for a GPU config, where one is present)."""
    if config.experiment is not None:
        raise ConfigError(
            f"{source} is a pre-registered experiment: its runs are fixed by experiment.looks ({2 * config.experiment.looks[-1]} at most); "
            "plan forecasts a search (fix: plan a search config)"
        )
    noise, pilot = _noise(config, noise_from, sd)
    if tokens_per_s is not None:
        speed: Speed | None = Speed(tokens_per_s, SPEED_STATED)
    else:  # the pilot's own runs where they are this config's work, else timed here
        speed = (pilot_speed(*pilot, config) if pilot else None) or _measured(config)
    return forecast(config, noise, margin or config.search.margin, speed)


def _noise(config: StudyConfig, noise_from: str | None, sd: float | None) -> tuple[Noise, tuple[optuna.Study, StudyConfig] | None]:
    """The noise and the pilot it came from (the stored study and its config; None for a stated sd)."""
    if sd is not None:
        return Noise(sd, NOISE_STATED), None
    name = noise_from or config.name
    if not is_stored(name, config.storage):
        if noise_from is None:
            raise ConfigError(
                f"no noise to forecast from: study {name!r} is not stored in {mask_url(config.storage)} yet "
                "(fix: --sd SD, the sd of one paired difference, or --noise-from STUDY, a stored study to read it from, with --storage)"
            )
        raise PrismSearchError(f"--noise-from {name!r}: no such study in {mask_url(config.storage)} (fix: check the name or --storage)")
    study = stored_study(name, config.storage)
    pilot = stored_config(study)
    noise = measured_noise(study_runs(study.get_trials(deepcopy=False), pilot), str(pilot.baseline), name)
    if noise is None:
        raise PrismSearchError(
            f"study {name!r} has measured no noise yet: no schedule has paired seeds and uniform has under 2 seeds "
            "(fix: --sd SD, or a pilot with search.baseline_seeds >= 2)"
        )
    return noise, (study, pilot)


def _measured(config: StudyConfig) -> Speed | None:
    """Tokens/s of the config's uniform model trained here, as one of its workers would (its threads, its device);
    None for a GPU config where no GPU is present. Random token ids: the speed does not depend on the text."""
    import numpy as np
    import torch

    from prism import Corpus, Trainer

    gpu = config.resources.gpus_per_trial > 0
    if gpu and not torch.cuda.is_available():
        return None
    device = "cuda" if gpu else "cpu"
    model = config.model_config_
    batch = config.train.batch_size
    n_ids = (TIMED_STEPS + WARMUP_STEPS + 2) * batch * (model.block_size + 1) * 2
    ids = np.random.default_rng(0).integers(0, model.vocab_size, size=n_ids).astype(np.int64)
    train = config.train.model_copy(update={"steps": TIMED_STEPS + WARMUP_STEPS + 1, "warmup_steps": 1, "eval_batches": 1})
    threads = torch.get_num_threads()
    torch.set_num_threads(config.resources.cpus_per_trial)
    try:
        trainer = Trainer(model, config.baseline, train.to_train_config(config.seed, device), Corpus("random", ids, model.vocab_size))
        trainer.train_steps(WARMUP_STEPS)
        start = time.perf_counter()
        trainer.train_steps(TIMED_STEPS)  # ends with a copy of the losses to the host: the device has finished
        elapsed = time.perf_counter() - start
    finally:
        torch.set_num_threads(threads)
    return Speed(
        TIMED_STEPS * trainer.tokens_per_step / elapsed,
        SPEED_MEASURED,
        steps=TIMED_STEPS,
        warmup=WARMUP_STEPS,
        threads=config.resources.cpus_per_trial,
        device=device,
        schedule=str(config.baseline),
    )
