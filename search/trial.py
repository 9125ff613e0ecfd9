"""The one trial entry point: a `TrialSpec` in, evaluation points and a `TrainResult` out.

`TrialSession` runs one trial an evaluation interval at a time. The search driver wraps it in a Ray actor
(local or on a cluster) and decides between intervals whether to prune; tests and in-process callers use
`run_trial`. Specs and results are plain picklable values, and a session never touches the database.

Checkpoints: with `checkpoint_dir` set, a finished trial saves its model there (a pruned one too when
keep_checkpoints="all") and names the directory in `TrainResult.extra["checkpoint"]`; deciding which ones
to keep for "best" is the driver's job, since only it knows the study's best trial.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field

import torch

from prism import EvalPoint, ModelConfig, Schedule, TrainConfig, Trainer, TrainResult, load_corpus, save_checkpoint


class CorpusMismatch(RuntimeError):
    """The worker's corpus differs from the one the study was created with."""


@dataclass(frozen=True)
class TrialSpec:
    study: str
    number: int
    schedule: str
    model: ModelConfig
    train: TrainConfig
    corpus: str
    val_fraction: float
    corpus_fingerprint: str
    threads: int = 1
    corpus_options: dict = field(default_factory=dict)  # load_corpus keywords: tokenizer, vocab_size, token_dtype
    checkpoint_dir: str | None = None  # where this trial's model goes; None: keep nothing
    keep_checkpoints: str = "none"  # best | all | none: "all" also saves pruned trials


class TrialSession:
    """Holds one trial's trainer between evaluation intervals; reused for many trials by a long-lived worker."""

    def __init__(self) -> None:
        self.trainer: Trainer | None = None
        self.spec: TrialSpec | None = None

    def start(self, spec: TrialSpec) -> dict:
        """Build the model and data for `spec`; returns where it runs. No training yet."""
        torch.set_num_threads(spec.threads)  # Ray's OMP_NUM_THREADS alone leaves torch on one thread
        corpus = load_corpus(spec.corpus, spec.val_fraction, **spec.corpus_options)
        if corpus.fingerprint != spec.corpus_fingerprint:
            raise CorpusMismatch(
                f"corpus {spec.corpus!r} on {socket.gethostname()} has fingerprint {corpus.fingerprint}, "
                f"the study was created with {spec.corpus_fingerprint}; use the same corpus files everywhere"
            )
        self.trainer = Trainer(spec.model, Schedule.parse(spec.schedule), spec.train, corpus)
        self.spec = spec
        return {"host": socket.gethostname(), "pid": os.getpid(), "device": str(self.trainer.device)}

    def advance(self) -> EvalPoint | TrainResult:
        """Train to the next evaluation; the final result once the budget is spent."""
        assert self.trainer is not None, "start() a trial first"
        if self.trainer.done:
            return self._end(save=self.spec.keep_checkpoints != "none")
        return self.trainer.run_to_next_eval()

    def stop(self) -> TrainResult:
        """End the trial now (pruned, or finished after its last evaluation) and free its model."""
        assert self.trainer is not None, "start() a trial first"
        return self._end(save=self.spec.keep_checkpoints == "all" or self.trainer.done and self.spec.keep_checkpoints != "none")

    def _end(self, save: bool) -> TrainResult:
        result, trainer, spec = self.trainer.result(), self.trainer, self.spec
        self.trainer = None
        if save and spec.checkpoint_dir:
            data = {"name": spec.corpus, "val_fraction": spec.val_fraction, **spec.corpus_options}
            path = save_checkpoint(trainer.model, spec.checkpoint_dir, study=spec.study, trial=spec.number, data=data,
                                   corpus_fingerprint=spec.corpus_fingerprint, train=trainer.cfg.__dict__,
                                   result=result.to_dict())
            result.extra["checkpoint"] = str(path)
        return result


def run_trial(spec: TrialSpec, should_stop=lambda point: False) -> TrainResult:
    """In-process use of the same entry point: advance until done or `should_stop(point)` says stop."""
    session = TrialSession()
    session.start(spec)
    while True:
        out = session.advance()
        if isinstance(out, TrainResult):
            return out
        if should_stop(out):
            return session.stop()
