"""Checkpoints: weights in safetensors, everything needed to rebuild the model in a JSON file beside them.

A checkpoint is a directory: `model.safetensors` plus `config.json` holding the ModelConfig, the schedule string
and whatever the caller adds (the training result, the corpus fingerprint). The schedule travels with the weights
because the same tensors mean a different model under a different head split.
"""

from __future__ import annotations

import json
from pathlib import Path

import safetensors.torch

from prism.config import EARLIER_DEFAULTS, ModelConfig
from prism.model import PrismLM
from prism.schedule import Schedule

WEIGHTS, CONFIG = "model.safetensors", "config.json"
FORMAT = "prism-checkpoint/1"


class CheckpointError(ValueError):
    """A directory that does not hold a loadable checkpoint; the message names the fix."""


def save_checkpoint(model: PrismLM, path: str | Path, **extra) -> Path:
    """Write `model` to directory `path` (created); `extra` must be JSON-serialisable."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    meta = {"format": FORMAT, "model": model.cfg.to_dict(), "schedule": str(model.schedule), **extra}
    (path / CONFIG).write_text(json.dumps(meta, indent=2, default=str))
    safetensors.torch.save_model(model, str(path / WEIGHTS))  # handles the tied embedding / lm_head
    return path


def read_checkpoint_config(path: str | Path) -> dict:
    path = Path(path)
    if not (path / CONFIG).is_file() or not (path / WEIGHTS).is_file():
        raise CheckpointError(f"{str(path)!r} is not a checkpoint (needs {CONFIG} and {WEIGHTS}); pass a directory written by --save")
    try:
        meta = json.loads((path / CONFIG).read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CheckpointError(f"{path / CONFIG}: not valid JSON ({e}); the checkpoint is damaged, write it again with --save") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        found = meta.get("format") if isinstance(meta, dict) else None
        raise CheckpointError(f"{path / CONFIG}: format {found!r} is not {FORMAT!r}")
    return meta


def load_checkpoint(path: str | Path, device: str = "cpu") -> tuple[PrismLM, dict]:
    """The model (eval mode, on `device`) and the checkpoint's JSON metadata; a damaged one is a CheckpointError."""
    meta = read_checkpoint_config(path)
    try:
        model = PrismLM(ModelConfig(**EARLIER_DEFAULTS["model"] | meta["model"]), Schedule.parse(meta["schedule"]))
        safetensors.torch.load_model(model, str(Path(path) / WEIGHTS), strict=True, device=device)
    except (KeyError, TypeError, ValueError, RuntimeError, safetensors.SafetensorError) as e:
        reason = str(e).strip().partition("\n")[0]
        raise CheckpointError(
            f"{str(path)!r} holds a damaged checkpoint ({type(e).__name__}: {reason}); write it again with --save"
        ) from None
    return model.to(device).eval(), meta
