"""The device a trial asks for, checked where it runs: this machine's torch is a CPU build, so a CUDA trial meets
the real refusal a GPU-less node gives."""

import dataclasses
import socket

import pytest
import torch

from search.runner.preflight import check_corpus
from search.runner.worker import DeviceUnavailable, TrialSession, TrialSpec, check_trial_device

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
    spec = TrialSpec.of(
        tiny_config,
        "1x1,2x1,4x1",
        fingerprint=check_corpus(tiny_config),
        number=0,
        seed=0,
        device="cuda",
        checkpoint_dir=None,
        keep_checkpoints="none",
        probe=False,
    )
    gpu_study = dataclasses.replace(spec, gpus=0.25)
    session = TrialSession()
    with pytest.raises(DeviceUnavailable, match=r"resources\.gpus_per_trial = 0\.25"):
        session.start(gpu_study)
    assert session.trainer is None and session.corpus is None  # nothing built, nothing loaded
