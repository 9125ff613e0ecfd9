"""torch.compile across a long-lived worker's trials: one graph per head count serves every schedule, so Dynamo's
recompile limit is never reached, and the warning it would give reaches the driver. Dynamo's `eager` backend
($PRISM_COMPILE_BACKEND) traces, guards and recompiles exactly as inductor does, without generating code: what
recompilation needs checked, in seconds on this CPU machine."""

import dataclasses

import pytest
import torch

from search.runner.messages import Finished
from search.runner.preflight import check_corpus
from search.runner.worker import TrialSession, TrialSpec, WarningRelay

# 2 layers of d_model 32, head dims 4..32: head counts 1, 2, 4, 8 and 16 two-layer schedules, 10 of them here
MODEL = {"n_layer": 2, "d_model": 32, "block_size": 16, "dh_min": 4, "dh_max": 32}
SCHEDULES = ["1x2", "2x2", "4x2", "8x2", "1,2", "2,4", "4,8", "8,1", "1,8", "2,8"]


@pytest.fixture
def compiled_spec(tiny_config, monkeypatch):
    monkeypatch.setenv("PRISM_COMPILE_BACKEND", "eager")
    config = tiny_config.model_copy(
        update={
            "model": tiny_config.model.model_copy(update=MODEL),
            "train": tiny_config.train.model_copy(
                update={"steps": 2, "batch_size": 2, "warmup_steps": 1, "eval_every": 1, "eval_batches": 1, "compile": True}
            ),
            "search": tiny_config.search.model_copy(update={"throughput_probe_steps": 1}),
            "space": tiny_config.space.model_copy(update={"baseline_heads": 2}),
        }
    )
    fingerprint = check_corpus(config)
    return TrialSpec.of(
        config, "2x2", fingerprint=fingerprint, number=0, seed=0, device="cpu", checkpoint_dir=None, keep_checkpoints="none", probe=True
    )


def test_a_worker_trains_ten_schedules_compiled_without_reaching_the_recompile_limit(compiled_spec):
    torch._dynamo.reset()
    session, warned = TrialSession(), []
    for number, schedule in enumerate(SCHEDULES):
        warned += session.start(dataclasses.replace(compiled_spec, number=number, schedule=schedule)).warnings
        while not isinstance(out := session.advance(), Finished):
            warned += out.warnings
        warned += out.warnings
        assert out.result.extra["throughput_ratio"] > 0  # the probes trained too, on the same compiled graphs
    assert not [w for w in warned if "recompile_limit" in w], warned
    graphs = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    assert 0 < graphs <= 2 * (4 + 1)  # train and eval, per head count and for the head: not per schedule


def test_the_recompile_limit_warning_is_relayed():
    """A real Dynamo warning, made by recompiling a function past a lowered limit, lands in the relay once."""
    relay = WarningRelay()
    relay.install()
    double = torch.compile(lambda x: x * 2, backend="eager")
    with torch._dynamo.config.patch(recompile_limit=2):
        for dims in range(1, 5):  # a tensor of another rank: a new graph each time
            double(torch.ones((2,) * dims))
    warned = relay.take()
    assert len([w for w in warned if "recompile_limit" in w]) == 1, warned
    assert relay.take() == ()  # each warning once
