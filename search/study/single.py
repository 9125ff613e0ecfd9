"""One model of a study's config, outside any study: `prism-search train` (one schedule, trained through the
runner's trial session in this process) and `prism-search analyze` (a saved model's per-layer metrics).

The model, training and data settings come from a study config (default: the built-in defaults), so a model
trained here is the same as that schedule's trial in a study with the same config and seed. Torch and the runner's
worker load inside the functions: importing this module stays light.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from prism import Schedule, ScheduleError, allowed_head_counts, load_corpus, val_batches, validate
from search.attrs import ATTR_CHECKPOINT
from search.config import StudyConfig, load_config, parse_config
from search.errors import ConfigError
from search.preflight import check_folder, preflight

if TYPE_CHECKING:
    import torch

    from prism import TrainResult
    from prism.analysis import LayerMetrics


@dataclass
class SingleRun:
    config: StudyConfig
    schedule: Schedule
    result: TrainResult
    profile: list[LayerMetrics] | None = None


def resolve(config_path: str | None, schedule: str, overrides: dict) -> tuple[StudyConfig, Schedule]:
    """Config + overrides, validated once; `schedule` is HEADSxLAYERS text or "uniform" (the study's baseline).

    `train.steps` without `train.warmup_steps` keeps the config's warmup share of the steps, so a shorter run
    (`--steps 50` on a config with 60 warmup steps) keeps the shape of its learning-rate schedule."""
    config = load_config(config_path) if config_path else parse_config({"name": "train"})
    steps, warmup = overrides.get("train.steps"), overrides.get("train.warmup_steps")
    if steps is not None and warmup is None:
        overrides = overrides | {"train.warmup_steps": config.train.warmup_steps * steps // config.train.steps}
    final_steps = config.train.steps if steps is None else steps
    if warmup is not None and warmup >= final_steps:
        raise ConfigError(
            f"--warmup-steps {warmup} must be below the {final_steps} training steps (fix: lower --warmup-steps or raise --steps)"
        )
    data = config.model_dump()
    for dotted, value in overrides.items():
        if value is not None:
            section, _, key = dotted.rpartition(".")
            (data[section] if section else data)[key] = value
    config = parse_config(data, config_path or "train")
    if schedule == "uniform":
        return config, config.baseline
    try:
        parsed = Schedule.parse(schedule, config.model.n_layer)
        validate(parsed, config.model_config_)
    except ScheduleError as e:
        model = f"{config_path}'s model" if config_path else "the built-in default model"
        raise ConfigError(
            f"schedule {schedule!r}: {e} ({model} has {config.model.n_layer} layers and head counts "
            f"{allowed_head_counts(config.model_config_)}; fix: write a schedule of those"
            + (", or train a study's model with --config STUDY.toml)" if not config_path else ")")
        ) from None
    return config, parsed


def profile(model: torch.nn.Module, data: dict, n_sequences: int = 4) -> list[LayerMetrics]:
    """Per-layer metrics on the first validation windows of the corpus `data` names (load_corpus keywords)."""
    import torch

    from prism.analysis import layer_profile

    x, _ = val_batches(load_corpus(**data), model.cfg.block_size, n_sequences, 1)[0]
    model.eval()
    with torch.no_grad():
        return layer_profile(model.trace(x.to(next(model.parameters()).device)))


def train_single(
    config: StudyConfig, schedule: Schedule, *, device: str = "cpu", save: str | None = None, analyze: bool = False
) -> SingleRun:
    """Train through the same trial session a study's workers run, in this process and without a database."""
    from prism import TrainingDiverged
    from search.runner.worker import TrialSpec, run_trial  # torch

    fingerprint = preflight(config, device=device)
    if save:
        check_folder(save, "--save")
        if Path(save).is_dir() and any(Path(save).iterdir()):
            raise ConfigError(
                f"--save {save!r} already holds files (a study's checkpoint?); refusing to replace them (fix: name a new folder)"
            )
    with tempfile.TemporaryDirectory() as scratch:  # --analyze reads the trained model back from its checkpoint
        spec = TrialSpec(
            study=config.name,
            number=None,
            schedule=str(schedule),
            model=config.model_config_,
            train=config.train.to_train_config(config.seed, device),
            corpus=config.data.corpus,
            val_fraction=config.data.val_fraction,
            corpus_fingerprint=fingerprint,
            threads=config.resources.cpus_per_trial,  # a study's workers' count: the same run, bit for bit
            corpus_options=config.data.corpus_options(),
            checkpoint_dir=save or (scratch if analyze else None),
            keep_checkpoints="best",
        )
        try:
            result = run_trial(spec)
        except TrainingDiverged as e:
            raise ConfigError(f"training diverged: {e} (fix: lower train.lr, or raise train.warmup_steps)") from None
        saved = result.extra.get(ATTR_CHECKPOINT)
        layers = analyze_checkpoint(saved)[1] if analyze and saved else None  # unsaved (a full disk): the error is shown
    if not save:
        result.extra.pop(ATTR_CHECKPOINT, None)
    return SingleRun(config, schedule, result, layers)


def analyze_checkpoint(path: str) -> tuple[dict, list[LayerMetrics]]:
    """Per-layer metrics of a saved model on the validation text of the corpus it was trained on."""
    from prism import CheckpointError, load_checkpoint  # torch

    try:
        model, meta = load_checkpoint(path)
    except CheckpointError as e:
        raise ConfigError(str(e)) from None  # its message names the fix
    if "data" not in meta:
        raise ConfigError(f"checkpoint {path!r} does not name its corpus; it was not written by prism-search")
    return meta, profile(model, meta["data"])


def analyze(source: str, storage_url: str) -> tuple[dict, list[LayerMetrics]]:
    """`analyze SOURCE`: a checkpoint folder, or a stored trial's (`STUDY:N`, `STUDY:baseline`) as `audit` reads it."""
    from search.priors import trial_checkpoint

    checkpoint = None if Path(source).is_dir() else trial_checkpoint(source, storage_url)
    return analyze_checkpoint(str(checkpoint or source))
