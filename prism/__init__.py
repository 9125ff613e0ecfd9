"""prism: the Prism Transformer model library (per-layer head schedules). Knows nothing of search."""

from prism.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from prism.config import ModelConfig
from prism.data import BUILTIN_CORPORA, Corpus, CorpusError, load_corpus, train_batches, val_batches
from prism.hf import load_hf_gpt2
from prism.model import PrismLM, Trace
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
from prism.train import EvalPoint, TrainConfig, Trainer, TrainingDiverged, TrainResult, train

__all__ = [
    "BUILTIN_CORPORA",
    "CheckpointError",
    "Corpus",
    "CorpusError",
    "EvalPoint",
    "ModelConfig",
    "PrismLM",
    "Schedule",
    "ScheduleError",
    "Trace",
    "TrainConfig",
    "TrainResult",
    "Trainer",
    "TrainingDiverged",
    "allowed_head_counts",
    "enumerate_monotone",
    "flops_per_token",
    "is_valid",
    "load_checkpoint",
    "load_corpus",
    "load_hf_gpt2",
    "param_count",
    "save_checkpoint",
    "train",
    "train_batches",
    "validate",
    "val_batches",
]
