"""The one trial entry point: a `TrialSpec` in, evaluation points and a `TrainResult` out.

`TrialSession` runs one trial an evaluation interval at a time. The search driver wraps it in a Ray actor
(local or on a cluster) and decides between intervals whether to prune; `prism-search train`
(search.study.single) runs the same session in process through `run_trial`. Specs and the session's answers
(search.runner.messages) are plain picklable values, and a session never touches the database.

Checkpoints: with `checkpoint_dir` set, a finished trial saves its model there (a pruned one too when
keep_checkpoints="all") and names the directory in `TrainResult.extra[ATTR_CHECKPOINT]`, or, where the disk
refused it, the reason in `extra[ATTR_CHECKPOINT_ERROR]`: the result is kept either way. Deciding which ones to keep
for "best" is the driver's job, since only it knows the study's best trial.

torch and prism's trainer are imported by the functions that train, in the worker: the driver imports this module
only for the actor's class and the spec, and never trains, so a `run` does not pay torch's import (about 1.4 s of
CPU) in its driver process.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import re
import shutil
import socket
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from prism import Schedule
from search.attrs import ATTR_CHECKPOINT, ATTR_CHECKPOINT_ERROR, THROUGHPUT_RATIO, UNIFORM_TOKENS_PER_S
from search.runner.messages import Evaluated, Finished, Started

if TYPE_CHECKING:
    import torch

    from prism import Corpus, ModelConfig, TrainConfig, Trainer, TrainResult
    from search.config import StudyConfig


class CorpusMismatch(RuntimeError):
    """The worker's corpus differs from the one the study was created with."""


class DeviceUnavailable(RuntimeError):
    """The node a trial landed on cannot give it the device it asks for: a fault of the node, not of the schedule,
    so the driver counts it against no schedule and stops the study (search.runner.driver)."""


class DoesNotFit(RuntimeError):
    """The trial ran out of GPU memory: alone, or beside the trials sharing its GPU."""


@dataclass(frozen=True)
class TrialSpec:
    study: str
    number: int | None  # None: a model trained outside a study (`prism-search train`)
    schedule: str
    model: ModelConfig
    train: TrainConfig
    corpus: str
    val_fraction: float
    corpus_fingerprint: str
    threads: int = 1
    baseline: str | None = None  # uniform schedule whose tokens/s the trial's is compared with (None: skip)
    probe_steps: int = 8
    corpus_options: dict = field(default_factory=dict)  # load_corpus keywords: tokenizer, vocab_size, token_dtype
    checkpoint_dir: str | None = None  # where this trial's model goes; None: keep nothing
    keep_checkpoints: str = "none"  # best | all | none: "all" also saves pruned trials
    trainer: Any = None  # an outside trainer's [trainer] section (search.trainers); None: prism's own, this session
    trial_dir: str | None = None  # an outside trainer's folder for this trial: its report, logs and whatever it saves
    study_uid: str | None = None  # the study's id, recorded in its checkpoints (search.runner.checkpoints)
    gpus: float = 0.0  # the study's resources.gpus_per_trial: what Ray reserved for the trial, named when it fails

    @classmethod
    def of(
        cls,
        config: StudyConfig,
        schedule: str,
        *,
        fingerprint: str,
        number: int | None,
        seed: int,
        device: str,
        checkpoint_dir: str | None,
        keep_checkpoints: str,
        probe: bool,
        study_uid: str | None = None,
    ) -> TrialSpec:
        """A study's run of `schedule` at `seed`, as its workers train it: the one place a config becomes a spec, so
        `prism-search train SCHEDULE --config STUDY.toml` is the study's run bit for bit. `probe`: also time the
        throughput ratio to the study's uniform baseline."""
        return cls(
            study=config.name,
            number=number,
            schedule=schedule,
            model=config.model_config_,
            train=config.train.to_train_config(seed, device),
            corpus=config.data.corpus,
            val_fraction=config.data.val_fraction,
            corpus_fingerprint=fingerprint,
            threads=config.resources.cpus_per_trial,  # a study's workers' count: another reorders float sums
            baseline=str(config.baseline) if probe else None,
            probe_steps=config.search.throughput_probe_steps,
            corpus_options=config.data.corpus_options(),
            keep_checkpoints=keep_checkpoints,
            checkpoint_dir=checkpoint_dir,
            **_outside_trainer(config, number, study_uid),
            study_uid=study_uid,
            gpus=config.resources.gpus_per_trial,
        )


def _outside_trainer(config: StudyConfig, number: int | None, study_uid: str | None) -> dict:
    """A study trial's command or python trainer (search.trainers) and the trial's own folder (in its study's
    checkpoint folder, search.runner.checkpoints); nothing for prism's."""
    from search.runner.checkpoints import study_folder

    if config.trainer.kind == "prism" or number is None:
        return {}
    return {"trainer": config.trainer, "trial_dir": str(study_folder(config, study_uid) / f"trial-{number:05d}")}


def check_trial_device(device: str, gpus: float) -> None:
    """Refuse, before a model is built, a CUDA device this process cannot use: a torch built without CUDA (torch
    would raise a bare AssertionError deep in the first `.to`) or no GPU visible to it (CUDA_VISIBLE_DEVICES)."""
    import torch

    parsed = torch.device(device)
    if parsed.type != "cuda":
        return
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if torch.version.cuda is None:
        why = f"its torch {torch.__version__} is built without CUDA"
    elif (count := torch.cuda.device_count()) <= (parsed.index or 0):
        why = f"torch sees {count} GPU(s) there (CUDA_VISIBLE_DEVICES={visible!r})"
    else:
        return
    asked = f"resources.gpus_per_trial = {gpus:g}" if gpus else f"device {device!r}"
    raise DeviceUnavailable(
        f"node {socket.gethostname()} cannot train on {device} as {asked} asks: {why} "
        "(fix: a CUDA build of torch and a GPU on every node Ray may use, or resources.gpus_per_trial = 0)"
    )


def throughput_ratio(spec: TrialSpec, corpus: Corpus) -> tuple[float, float]:
    """(tokens/s of spec.schedule / tokens/s of spec.baseline, baseline tokens/s), timed in this process.

    Both schedules train from fresh weights on the same batches, one step each in turn, `probe_steps` steps;
    each schedule's speed is its fastest step (the first, which pays one-off set-up, excluded): under other
    load on the machine the fastest step is the one least disturbed, and alternating exposes both to the same load.
    """
    from prism import Trainer

    assert spec.baseline is not None, "a spec without a baseline has no throughput ratio"
    cfg = replace(spec.train, steps=spec.probe_steps + 1, warmup_steps=0, eval_every=1, eval_batches=1)
    trainers = {text: Trainer(spec.model, Schedule.parse(text), cfg, corpus) for text in (spec.schedule, spec.baseline)}
    fastest = dict.fromkeys(trainers, math.inf)
    for step in range(cfg.steps):
        for text, trainer in trainers.items():
            before = trainer.train_time
            trainer.run_to_next_eval()
            if step:
                fastest[text] = min(fastest[text], trainer.train_time - before)
    tokens_per_step = cfg.batch_size * spec.model.block_size
    return fastest[spec.baseline] / fastest[spec.schedule], tokens_per_step / fastest[spec.baseline]


class WarningRelay(logging.Handler):
    """Collects the warnings torch logs in a worker process (Dynamo's recompile limit, inductor's fallbacks), each
    distinct one once, for the driver to print: Ray keeps a worker's own log on its node. An added handler: torch's
    own still prints them where they always went."""

    LOGGERS = ("torch", "torch._dynamo", "torch._inductor")  # torch's loggers: none propagates to another

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.seen: set[str] = set()
        self.fresh: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        text = f"{record.name}: {record.getMessage()}".splitlines()[0]
        if text not in self.seen:
            self.seen.add(text)
            self.fresh.append(text)

    def install(self) -> None:
        """Take over from any earlier relay of this process: the newest session is the one whose trials run."""
        for name in self.LOGGERS:
            logger = logging.getLogger(name)
            for earlier in [h for h in logger.handlers if isinstance(h, WarningRelay)]:
                logger.removeHandler(earlier)
            logger.addHandler(self)

    def take(self) -> tuple[str, ...]:
        fresh, self.fresh = tuple(self.fresh), []
        return fresh


class TrialSession:
    """Holds one trial's trainer between evaluation intervals; reused for many trials by a long-lived worker."""

    def __init__(self) -> None:
        self.trainer: Trainer | None = None
        self.spec: TrialSpec | None = None
        self.corpus: Corpus | None = None
        self.warnings = WarningRelay()
        self.warnings.install()

    def _free(self) -> None:
        """Drop the held trainer and return its GPU memory, so the next model is built where it was: the GPU may
        be shared with other trials' processes, which the cached blocks would otherwise starve."""
        import torch

        self.trainer = None
        torch.cuda.empty_cache()  # nothing where CUDA was never initialised

    @contextlib.contextmanager
    def _fitting(self, spec: TrialSpec) -> Iterator[None]:
        """Turn CUDA's out-of-memory error into one line with the estimate and the share the trial had."""
        import torch

        try:
            yield
        except torch.OutOfMemoryError:
            self._free()
            from search.runner.preflight import sizes_of, trial_bytes

            need = trial_bytes(sizes_of(spec.model, spec.train.batch_size), spec.train.device)
            raise DoesNotFit(
                f"out of GPU memory on {socket.gethostname()}: {spec.schedule} does not fit at resources.gpus_per_trial = "
                f"{spec.gpus:g} (estimated {need / 2**30:.1f} GiB per trial with its CUDA context; fix: a larger "
                "gpus_per_trial, so fewer trials share a GPU, or a smaller train.batch_size)"
            ) from None

    def start(self, spec: TrialSpec) -> Started:
        """Build the model and data for `spec`; says where it runs. No training yet."""
        import torch

        from prism import Trainer, load_corpus

        check_trial_device(spec.train.device, spec.gpus)
        self._free()  # a failed trial's model is still held: never two at once
        torch.set_num_threads(spec.threads)  # Ray's OMP_NUM_THREADS alone leaves torch on one thread
        corpus = load_corpus(spec.corpus, spec.val_fraction, **spec.corpus_options)
        if corpus.fingerprint != spec.corpus_fingerprint:
            raise CorpusMismatch(
                f"corpus {spec.corpus!r} on {socket.gethostname()} has fingerprint {corpus.fingerprint}, "
                f"the study was created with {spec.corpus_fingerprint}; use the same corpus files everywhere"
            )
        with self._fitting(spec):
            self.trainer = Trainer(spec.model, Schedule.parse(spec.schedule), spec.train, corpus)
        self.spec, self.corpus = spec, corpus
        device = self.trainer.device
        where = {"host": socket.gethostname(), "pid": os.getpid(), "device": str(device), "kernels": _kernels(device)}
        return Started(where, self.warnings.take())

    def advance(self) -> Evaluated | Finished:
        """Train to the next evaluation; the final result once the budget is spent."""
        assert self.trainer is not None and self.spec is not None, "start() a trial first"
        with self._fitting(self.spec):
            if self.trainer.done:
                result = self._end(save=self.spec.keep_checkpoints != "none")
                return Finished(result, self.warnings.take())
            return Evaluated(self.trainer.run_to_next_eval(), self.warnings.take())

    def stop(self) -> Finished:
        """End the trial now (pruned, or finished after its last evaluation) and free its model."""
        assert self.trainer is not None and self.spec is not None, "start() a trial first"
        save = self.spec.keep_checkpoints == "all" or (self.trainer.done and self.spec.keep_checkpoints != "none")
        with self._fitting(self.spec):
            result = self._end(save)
        return Finished(result, self.warnings.take())

    def _end(self, save: bool) -> TrainResult:
        assert self.trainer is not None and self.spec is not None and self.corpus is not None, "start() a trial first"
        result, trainer, spec, corpus = self.trainer.result(), self.trainer, self.spec, self.corpus
        if save and spec.checkpoint_dir:
            result.extra |= _save(trainer, spec, result)
        del trainer
        self._free()  # the trained model is on disk (or not kept): the probes' two models take its place
        if spec.baseline is not None:
            ratio, uniform = throughput_ratio(spec, corpus)
            result.extra |= {THROUGHPUT_RATIO: ratio, UNIFORM_TOKENS_PER_S: uniform}
        return result


def _save_error(e: Exception) -> str:
    """The OS's reason, in the words of an OSError's (safetensors: "I/O error: No space left on device (os error 28)")."""
    if isinstance(e, OSError) and e.strerror:
        return e.strerror
    found = re.search(r"I/O error: (.*?) \(os error \d+\)", str(e))
    return found[1] if found else str(e)


def _save(trainer: Trainer, spec: TrialSpec, result: TrainResult) -> dict:
    """Save the trained model; what to store on the trial. The result outlives its checkpoint: a full or read-only
    disk costs the model (removed half-written, the reason stored), never the trained trial's result."""
    import safetensors

    from prism import save_checkpoint

    assert spec.checkpoint_dir is not None
    data = {"name": spec.corpus, "val_fraction": spec.val_fraction, **spec.corpus_options}
    try:
        path = save_checkpoint(
            trainer.model,
            spec.checkpoint_dir,
            study=spec.study,
            study_uid=spec.study_uid,
            trial=spec.number,
            data=data,
            corpus_fingerprint=spec.corpus_fingerprint,
            train=trainer.cfg.__dict__,
            result=result.to_dict(),
        )
    except (OSError, safetensors.SafetensorError) as e:  # safetensors reports its own writes' OSErrors as its error
        shutil.rmtree(spec.checkpoint_dir, ignore_errors=True)
        return {ATTR_CHECKPOINT_ERROR: f"model not saved to {spec.checkpoint_dir}: {_save_error(e)}"}
    return {ATTR_CHECKPOINT: str(path)}


def _kernels(device: torch.device) -> str:
    """Which kernels did the arithmetic. The same (schedule, seed) trained in two sessions days apart differed
    by up to 3.8e-3 in val loss after 1,000 steps (docs/results.md), while one machine repeats a run bit for
    bit; the kernels torch picks per CPU feature set (or GPU model) are one candidate, so each trial records them
    and an analysis can tell which pairs ran on the same kind of hardware."""
    import torch

    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"cpu {torch.backends.cpu.get_cpu_capability()}"


def run_trial(spec: TrialSpec) -> TrainResult:
    """A whole trial in this process, through the same session a worker runs (`prism-search train`)."""
    session = TrialSession()
    session.start(spec)
    while not isinstance(out := session.advance(), Finished):
        pass
    return out.result
