"""Experiment trackers (`[tracking]`, `--track`): MLflow, TensorBoard and W&B get one run per finished trial.

Each is an optional extra; nothing here imports a tracker library until a trial is logged, so a missing one is
found by `make_trackers` before any compute.
"""

from __future__ import annotations

import importlib.util

from search.config import TrackingSection
from search.errors import ConfigError, PrismSearchError
from search.outputs.urls import lost_credentials, mask_url
from search.tracking._base import Tracker, TrialRecord
from search.tracking._mlflow import MLflowTracker
from search.tracking._tensorboard import TensorBoardTracker
from search.tracking._wandb import WandbTracker

__all__ = ["MLflowTracker", "TensorBoardTracker", "Tracker", "TrialRecord", "WandbTracker", "make_trackers"]

TRACKERS: dict[str, type[Tracker]] = {"mlflow": MLflowTracker, "tensorboard": TensorBoardTracker, "wandb": WandbTracker}
MODULES = {"mlflow": "mlflow", "tensorboard": "tensorboard", "wandb": "wandb"}  # what each needs importable


def make_trackers(tracking: TrackingSection) -> list[Tracker]:
    """The configured trackers; a missing library, or a URI whose credentials the stored config masked, is a
    one-line error naming the fix."""
    trackers = []
    for name, cls in TRACKERS.items():
        target = getattr(tracking, name)
        if target is None:
            continue
        if lost_credentials(target):
            raise ConfigError(
                f"tracking.{name} {mask_url(target)!r}: a study stores tracking URIs without their credentials; "
                f"fix: give it again with --track {name}=URI"
            )
        if importlib.util.find_spec(MODULES[name]) is None:
            raise PrismSearchError(f"tracking.{name} needs {MODULES[name]}: pip install 'prism-search[{name}]'")
        trackers.append(cls(target))
    return trackers
