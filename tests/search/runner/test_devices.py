"""The device a trial asks for, checked where it runs (this machine's torch is a CPU build, so a CUDA trial meets
the real refusal a GPU-less node gives), and a worker's memory when trials share a GPU."""

import dataclasses
import socket
import weakref

import pytest
import torch
from optuna.trial import TrialState

import prism
from search.runner.messages import Finished
from search.runner.preflight import CUDA_CONTEXT_BYTES, check_corpus, sizes_of, trial_bytes
from search.runner.worker import DeviceUnavailable, DoesNotFit, TrialSession, TrialSpec, check_trial_device

pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="needs a torch that cannot use CUDA")


def test_a_cuda_trial_on_a_torch_without_cuda_is_refused_naming_the_resource_and_the_node():
    with pytest.raises(DeviceUnavailable) as info:
        check_trial_device("cuda", 0.5)
    message = str(info.value)
    assert f"node {socket.gethostname()} cannot train on cuda as resources.gpus_per_trial = 0.5 asks" in message
    assert f"torch {torch.__version__} is built without CUDA" in message and "\n" not in message
    with pytest.raises(DeviceUnavailable, match="cannot train on cuda:1 as device 'cuda:1' asks"):
        check_trial_device("cuda:1", 0)
    check_trial_device("cpu", 0)  # the CPU is always there


def test_the_session_refuses_before_building_a_model(tiny_config):
    spec = _spec(tiny_config, gpus=0.25)
    gpu_study = dataclasses.replace(spec, train=dataclasses.replace(spec.train, device="cuda"))
    session = TrialSession()
    with pytest.raises(DeviceUnavailable, match=r"resources\.gpus_per_trial = 0\.25"):
        session.start(gpu_study)
    assert session.trainer is None and session.corpus is None  # nothing built, nothing loaded


def _spec(tiny_config, **changes) -> TrialSpec:
    spec = TrialSpec.of(
        tiny_config,
        "1x1,2x1,4x1",
        fingerprint=check_corpus(tiny_config),
        number=0,
        seed=0,
        device="cpu",
        checkpoint_dir=None,
        keep_checkpoints="none",
        probe=True,
    )
    short = dataclasses.replace(spec.train, steps=4, warmup_steps=1, eval_every=2)
    return dataclasses.replace(spec, train=short, probe_steps=2, **changes)


def test_one_model_at_a_time_the_next_built_after_the_last_is_dropped_and_probes_after_the_trained_one(tiny_config, monkeypatch):
    """Trials share a GPU: a worker never holds a failed trial's model while building the next, nor the trained
    model while its two probe models train. Watched through weak references to each model built."""
    built: list[weakref.ref] = []
    alive_at_build: list[int] = []

    class Watched(prism.Trainer):
        def __init__(self, *args, **kwargs):
            alive_at_build.append(sum(ref() is not None for ref in built))
            super().__init__(*args, **kwargs)
            built.append(weakref.ref(self.model))

    monkeypatch.setattr(prism, "Trainer", Watched)  # the worker imports it when a trial starts
    session = TrialSession()
    session.start(_spec(tiny_config))
    session.advance()  # mid-trial, as when a trial fails and the worker is handed the next
    session.start(_spec(tiny_config, number=1))
    assert alive_at_build == [0, 0]
    while not isinstance(session.advance(), Finished):
        pass
    assert alive_at_build == [0, 0, 0, 1]  # the probes' two models, one beside the other: never the trained one


def test_out_of_gpu_memory_is_one_line_with_the_share_and_the_estimate(tiny_config, monkeypatch):
    """CUDA's out-of-memory error cannot happen on this CPU machine: raised in its place where the model is built."""

    def out_of_memory(*args, **kwargs):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(prism, "Trainer", out_of_memory)
    with pytest.raises(DoesNotFit) as info:
        TrialSession().start(_spec(tiny_config, gpus=0.25))
    message = str(info.value)
    assert "1x1,2x1,4x1 does not fit at resources.gpus_per_trial = 0.25 (estimated " in message
    assert "GiB per trial" in message and "fix: a larger gpus_per_trial" in message and "\n" not in message


def test_preflight_counts_a_cuda_context_per_trial(tiny_config):
    sizes = sizes_of(tiny_config.model, tiny_config.train.batch_size)
    assert trial_bytes(sizes, "cuda:0") == trial_bytes(sizes, "cpu") + CUDA_CONTEXT_BYTES


class RunsOutOfMemoryOnce(TrialSession):
    """A worker whose first trial meets CUDA's out-of-memory error (raised in its place: there is no GPU here)."""

    def __init__(self):
        super().__init__()
        self.first = True

    def start(self, spec):
        if self.first:
            self.first = False
            with self._fitting(spec):
                raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return super().start(spec)


def test_a_trial_out_of_gpu_memory_is_retried_without_blaming_its_schedule(ray_local, tiny_config):
    from search.runner.driver import Driver
    from search.storage import open_storage
    from search.study.create import open_study
    from search.study.pruning import make_stopping

    config = tiny_config.model_copy(update={"n_trials": 1, "search": tiny_config.search.model_copy(update={"max_failed_trials": 0})})
    config = config.model_copy(update={"train": config.train.model_copy(update={"steps": 20, "eval_every": 10})})
    ctx = open_study(config, open_storage(config.storage), check_corpus(config))
    driver = Driver(ctx, stopping=make_stopping(ctx), session_cls=RunsOutOfMemoryOnce)
    driver.run(2, n_workers=1)  # the other baseline seed, then the retry: queued trials run first
    trials = ctx.study.get_trials()
    (oom,) = [t for t in trials if "does not fit" in t.user_attrs.get("error", "")]
    assert oom.state == TrialState.FAIL and oom.user_attrs["error"].startswith("DoesNotFit: out of GPU memory on ")
    assert "does not fit at resources.gpus_per_trial = 0 (estimated " in oom.user_attrs["error"]
    assert "failed_itself" not in oom.user_attrs and driver.failures == 0  # not the schedule's fault, not counted
    (retry,) = [t for t in trials if t.user_attrs.get("retry_of") == oom.number]
    assert retry.state == TrialState.COMPLETE and retry.user_attrs["schedule"] == oom.user_attrs["schedule"]
