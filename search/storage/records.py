"""What a trial stores: the names of its Optuna user attrs, shared by every writer (runner) and reader (study,
export, dashboard) of a study, so none of them spells a key on its own."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from prism import Schedule, TrainResult

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
