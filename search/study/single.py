"""One model of a study's config, outside any study: `prism-search train` (one schedule, trained through the
runner's trial session in this process) and `prism-search analyze` (a saved model's per-layer metrics).

The model, training and data settings come from a study config (default: the built-in defaults), so a model
trained here is the same as that schedule's trial in a study with the same config and seed. Torch and the runner's
worker load inside the functions: importing this module stays light.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from prism import Schedule, ScheduleError, allowed_head_counts, load_corpus, val_batches, validate
from search.attrs import ATTR_CHECKPOINT
from search.config import StudyConfig, parse_config, read_toml
from search.errors import ConfigError
from search.runner.preflight import check_folder, preflight

if TYPE_CHECKING:
    import torch

    from prism import TrainResult
    from prism.analysis import LayerMetrics


@dataclass
class SingleRun:
    """One model of a study's config trained outside any study (`prism-search train`)."""

    config: StudyConfig
    schedule: Schedule
    result: TrainResult
    profile: list[LayerMetrics] | None = None

    @classmethod
    def train(
        cls,
        config_path: str | None,
        schedule: str,
        overrides: TrainOverrides | None = None,
        *,
        device: str = "cpu",
        save: str | None = None,
        analyze: bool = False,
    ) -> SingleRun:
        """Train `schedule` (HEADSxLAYERS, or "uniform") with the study config at `config_path` (default: the
        built-in defaults) and `overrides` on top, through the trial session a study's workers run; `save`: the
        checkpoint's folder; `analyze`: also measure its per-layer metrics."""
        config, parsed = resolve(config_path, schedule, overrides or TrainOverrides())
        return train_single(config, parsed, device=device, save=save, analyze=analyze)


@dataclass(frozen=True)
class ModelMetrics:
    """A saved model's per-layer metrics on the validation text of the corpus it was trained on (`analyze`)."""

    meta: dict  # the checkpoint's metadata: its schedule, model and corpus
    layers: list[LayerMetrics]

    @classmethod
    def of(cls, source: str, storage_url: str) -> ModelMetrics:
        """`source`: a checkpoint folder, or a stored trial's (`STUDY:N`, `STUDY:baseline`) as `audit` reads it."""
        from search.priors import trial_checkpoint

        checkpoint = None if Path(source).is_dir() else trial_checkpoint(source, storage_url)
        return cls(*analyze_checkpoint(str(checkpoint or source)))


@dataclass(frozen=True)
class TrainOverrides:
    """What `prism-search train` puts on top of a study's config; None keeps the config's value."""

    corpus: str | None = None
    tokenizer: str | None = None
    vocab_size: int | None = None
    steps: int | None = None
    warmup_steps: int | None = None
    seed: int | None = None
    threads: int | None = None  # resources.cpus_per_trial: a study's workers' count, so the run is the study's

    def applied(self, data: dict) -> dict:
        """`data` (a config's tables, as its file wrote them) with the overrides that are set."""
        sections: dict[str, dict[str, object]] = {
            "data": {"corpus": self.corpus, "tokenizer": self.tokenizer, "vocab_size": self.vocab_size},
            "train": {"steps": self.steps, "warmup_steps": self.warmup_steps},
            "resources": {"cpus_per_trial": self.threads},
        }
        out = dict(data) if self.seed is None else data | {"seed": self.seed}
        for section, values in sections.items():
            out[section] = out.get(section, {}) | {k: v for k, v in values.items() if v is not None}
        return out


def resolve(config_path: str | None, schedule: str, overrides: TrainOverrides) -> tuple[StudyConfig, Schedule]:
    """Config + overrides, validated; `schedule` is HEADSxLAYERS text or "uniform" (the study's baseline).

    `steps` without `warmup_steps` keeps the config's warmup share of the steps, so a shorter run (`--steps 50` on
    a config with 60 warmup steps) keeps the shape of its learning-rate schedule."""
    # the file's own tables, not the parsed config's dump: a value the parse derived (the model's vocab from the
    # data) is derived again from the overridden data
    raw = read_toml(config_path) if config_path else {"name": "train"}
    config = parse_config(raw, config_path or "train")
    steps, warmup = overrides.steps, overrides.warmup_steps
    if steps is not None and warmup is None:
        overrides = replace(overrides, warmup_steps=config.train.warmup_steps * steps // config.train.steps)
    final_steps = config.train.steps if steps is None else steps
    if warmup is not None and warmup >= final_steps:
        raise ConfigError(
            f"--warmup-steps {warmup} must be below the {final_steps} training steps (fix: lower --warmup-steps or raise --steps)"
        )
    config = parse_config(overrides.applied(raw), config_path or "train")
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

    fingerprint = preflight(config, device=device).fingerprint
    if save:
        check_folder(save, "--save")
        if Path(save).is_dir() and any(Path(save).iterdir()):
            raise ConfigError(
                f"--save {save!r} already holds files (a study's checkpoint?); refusing to replace them (fix: name a new folder)"
            )
    with tempfile.TemporaryDirectory() as scratch:  # --analyze reads the trained model back from its checkpoint
        spec = TrialSpec.of(
            config,
            str(schedule),
            fingerprint=fingerprint,
            number=None,
            seed=config.seed,
            device=device,
            checkpoint_dir=save or (scratch if analyze else None),
            keep_checkpoints="best",
            probe=False,
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
