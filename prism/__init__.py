"""prism: the Prism Transformer model library (per-layer head schedules). Knows nothing of search.

Each public name loads its module on first use (PEP 562), so reading a config, a schedule or a corpus does not
import torch; the model, the batches and the trainer do. `from prism import ...` works as for any package.
"""

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # what type checkers read; at run time __getattr__ below imports each name on first use
    from prism.analysis import LayerMetrics, format_profile, layer_profile
    from prism.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
    from prism.config import ModelConfig, TrainConfig
    from prism.data import BUILTIN_CORPORA, Corpus, CorpusError, corpus_vocab, load_corpus, train_batches, val_batches
    from prism.hf import load_hf_gpt2
    from prism.model import PrismLM, Trace
    from prism.results import EvalPoint, TrainResult
    from prism.schedule import (
        Schedule,
        ScheduleError,
        allowed_head_counts,
        enumerate_monotone,
        flops_per_token,
        is_valid,
        param_count,
        validate,
    )
    from prism.tasks import TASKS, RecallTask, TaskError, is_task, parse_task
    from prism.training import Trainer, TrainingDiverged, train

_EXPORTS = {
    "prism.analysis": ("LayerMetrics", "format_profile", "layer_profile"),
    "prism.checkpoint": ("CheckpointError", "load_checkpoint", "save_checkpoint"),
    "prism.config": ("ModelConfig", "TrainConfig"),
    "prism.data": ("BUILTIN_CORPORA", "Corpus", "CorpusError", "corpus_vocab", "load_corpus", "train_batches", "val_batches"),
    "prism.hf": ("load_hf_gpt2",),
    "prism.model": ("PrismLM", "Trace"),
    "prism.schedule": (
        "Schedule",
        "ScheduleError",
        "allowed_head_counts",
        "enumerate_monotone",
        "flops_per_token",
        "is_valid",
        "param_count",
        "validate",
    ),
    "prism.tasks": ("TASKS", "RecallTask", "TaskError", "is_task", "parse_task"),
    "prism.results": ("EvalPoint", "TrainResult"),
    "prism.training": ("Trainer", "TrainingDiverged", "train"),
}
_HOME = {name: module for module, names in _EXPORTS.items() for name in names}
__all__ = sorted(_HOME)


def __getattr__(name: str) -> object:
    if name not in _HOME:
        raise AttributeError(f"module 'prism' has no attribute {name!r}")
    value = getattr(importlib.import_module(_HOME[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
