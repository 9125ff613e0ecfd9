"""The one trial entry point: a `TrialSpec` in, evaluation points and a `TrainResult` out.

`TrialSession` runs one trial an evaluation interval at a time. The search driver wraps it in a Ray actor
(local or on a cluster) and decides between intervals whether to prune; tests and in-process callers use
`run_trial`. Specs and results are plain picklable values, and a session never touches the database.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, replace

import torch

from prism import Corpus, EvalPoint, ModelConfig, Schedule, TrainConfig, Trainer, TrainResult, load_corpus


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
    baseline: str | None = None  # uniform schedule whose tokens/s the trial's is compared with (None: skip)
    probe_steps: int = 8


def throughput_ratio(spec: TrialSpec, corpus: Corpus, rounds: int = 2) -> tuple[float, float]:
    """(tokens/s of spec.schedule / tokens/s of spec.baseline, baseline tokens/s), timed in this process.

    Both schedules train `probe_steps` steps from fresh weights on the same batches, alternating for `rounds`
    rounds; each keeps its best round, the one least disturbed by other load on the machine.
    """
    cfg = replace(spec.train, steps=spec.probe_steps, warmup_steps=0, eval_every=spec.probe_steps, eval_batches=1)
    best = {spec.schedule: 0.0, spec.baseline: 0.0}
    for _ in range(rounds):
        for text in best:
            trainer = Trainer(spec.model, Schedule.parse(text), cfg, corpus)
            trainer.run_to_next_eval()
            best[text] = max(best[text], trainer.result().tokens_per_s)
    return best[spec.schedule] / best[spec.baseline], best[spec.baseline]


class TrialSession:
    """Holds one trial's trainer between evaluation intervals; reused for many trials by a long-lived worker."""

    def __init__(self) -> None:
        self.trainer: Trainer | None = None
        self.spec: TrialSpec | None = None
        self.corpus: Corpus | None = None

    def start(self, spec: TrialSpec) -> dict:
        """Build the model and data for `spec`; returns where it runs. No training yet."""
        torch.set_num_threads(spec.threads)  # Ray's OMP_NUM_THREADS alone leaves torch on one thread
        corpus = load_corpus(spec.corpus, spec.val_fraction)
        if corpus.fingerprint != spec.corpus_fingerprint:
            raise CorpusMismatch(
                f"corpus {spec.corpus!r} on {socket.gethostname()} has fingerprint {corpus.fingerprint}, "
                f"the study was created with {spec.corpus_fingerprint}; use the same corpus files everywhere"
            )
        self.trainer = Trainer(spec.model, Schedule.parse(spec.schedule), spec.train, corpus)
        self.spec, self.corpus = spec, corpus
        return {"host": socket.gethostname(), "pid": os.getpid(), "device": str(self.trainer.device)}

    def advance(self) -> EvalPoint | TrainResult:
        """Train to the next evaluation; the final result once the budget is spent."""
        assert self.trainer is not None, "start() a trial first"
        if self.trainer.done:
            return self.stop()
        return self.trainer.run_to_next_eval()

    def stop(self) -> TrainResult:
        """End the trial now (finished or pruned) and free its model."""
        assert self.trainer is not None, "start() a trial first"
        result, self.trainer = self.trainer.result(), None
        if self.spec.baseline is not None:
            ratio, uniform = throughput_ratio(self.spec, self.corpus)
            result.extra |= {"throughput_ratio": ratio, "uniform_tokens_per_s": uniform}
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
