"""A short study on a Ray cluster whose workers also report what Ray assigned them.

test_cluster.py runs it as `python -m tests.search.runner.cluster_probe ADDRESS STORAGE_URL`, in its own process
because the test process may already hold the session's local Ray; ADDRESS `gpus=N` starts a local Ray that
declares N GPUs instead of joining one. Run as `__main__`, `ProbeSession` travels to the workers by value. The
resources come from the study config exactly as `run` reads them.
"""

import dataclasses
import os
import sys

import ray
import torch

from search.config import parse_config
from search.runner.cluster import connect_ray
from search.runner.driver import Driver
from search.runner.messages import Started
from search.runner.preflight import check_corpus
from search.runner.worker import TrialSession
from search.storage import open_storage
from search.study.create import open_study
from search.study.pruning import make_stopping
from tests.search.conftest import ROOT

RESOURCES = {"workers": 2, "cpus_per_trial": 3, "gpus_per_trial": 0.5}
SHARED_GPUS = {"workers": 4, "cpus_per_trial": 1, "gpus_per_trial": 0.5}  # with gpus=2: two trials on each GPU


class ProbeSession(TrialSession):
    """A real trial, trained on the CPU even though the study asks for (logical) GPUs, plus Ray's view of it."""

    def start(self, spec):
        started = super().start(dataclasses.replace(spec, train=dataclasses.replace(spec.train, device="cpu")))
        ctx = ray.get_runtime_context()
        return Started(
            started.where
            | {
                "node": ctx.get_node_id(),
                "resources": ctx.get_assigned_resources(),
                "torch_threads": torch.get_num_threads(),
                "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
            }
        )


def main(address: str, url: str) -> None:
    import tomllib

    local_gpus = int(address.removeprefix("gpus=")) if address.startswith("gpus=") else None
    resources = RESOURCES if local_gpus is None else SHARED_GPUS
    data = tomllib.loads((ROOT / "studies" / "tiny.toml").read_text())
    if local_gpus is not None:  # what is checked is where trials ran, not what they learnt
        data["train"] |= {"steps": 20, "eval_every": 10}
    config = parse_config(data | {"n_trials": resources["workers"], "storage": url, "resources": resources}, "probe")
    fingerprint = check_corpus(config)
    ctx = open_study(config, open_storage(url), fingerprint)
    if local_gpus is None:
        connect_ray(address, num_cpus=0)
    else:  # Ray schedules declared GPUs as it would real ones, CUDA_VISIBLE_DEVICES included
        ray.init(num_cpus=resources["workers"], num_gpus=local_gpus, include_dashboard=False, log_to_driver=False)
    Driver(ctx, stopping=make_stopping(ctx), session_cls=ProbeSession).run(config.n_trials, config.resources.workers)


if __name__ == "__main__":
    main(*sys.argv[1:])
