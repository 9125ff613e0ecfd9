"""Two steps of scripts/gpu_check.sh that no other script takes: compiling across schedules, and a trial's memory.

    python scripts/gpu_steps.py compile        # 6 schedules compiled in one process: graphs, recompile warnings, tokens/s
    python scripts/gpu_steps.py trial-memory   # one worker session's trial with probes: memory after each phase

Both run on the local CUDA GPU, or on the CPU where there is none: a dry run of the same code on a model a
quarter as wide and a quarter as long, whose numbers say nothing about a GPU. `compile` needs only torch and
prism/; `trial-memory` runs the service's worker session (search.runner.worker), so it needs the service's packages.
"""

from __future__ import annotations

import argparse
import logging
import resource
import time

import torch

from prism import ModelConfig, Schedule, TrainConfig, Trainer, load_corpus

GPU_MODEL = ModelConfig(n_layer=6, d_model=256, block_size=128, dh_min=32, dh_max=256)  # head counts 1, 2, 4, 8
CPU_MODEL = ModelConfig(n_layer=6, d_model=64, block_size=32, dh_min=8, dh_max=64)  # the same head counts
SCHEDULES = ["4x6", "1x6", "8x6", "1x2,2x2,4x2", "8x2,4x2,2x2", "2x3,8x3"]


def _device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def _model() -> ModelConfig:
    return GPU_MODEL if torch.cuda.is_available() else CPU_MODEL


def _memory() -> str:
    """GPU memory allocated now and at its peak, or the process's peak resident memory on the CPU."""
    if torch.cuda.is_available():
        return f"allocated {torch.cuda.memory_allocated() / 2**20:,.0f} MiB, peak {torch.cuda.max_memory_allocated() / 2**20:,.0f} MiB"
    return f"process peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10:,.0f} MiB"


def compile_check(steps: int) -> None:
    warned: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            warned.append(record.getMessage().splitlines()[0])

    for name in ("torch", "torch._dynamo", "torch._inductor"):
        logging.getLogger(name).addHandler(Keep(logging.WARNING))
    device = _device()
    corpus = load_corpus()
    tcfg = TrainConfig(steps=steps, batch_size=16, warmup_steps=2, eval_every=steps, eval_batches=2, device=device, compile=True)
    print(f"device {device}, torch {torch.__version__}; {len(SCHEDULES)} schedules compiled in one process, {steps} steps each")
    for text in SCHEDULES:
        started = time.perf_counter()
        trainer = Trainer(_model(), Schedule.parse(text), tcfg, corpus)
        point = trainer.run_to_next_eval()
        print(
            f"{text:<16} tokens/s {trainer.tokens_per_s:>10,.0f}  val {point.val_loss:.3f}  wall {time.perf_counter() - started:6.1f} s  "
            f"graphs so far {torch._dynamo.utils.counters['stats']['unique_graphs']}"
        )
    limit = [w for w in warned if "recompile_limit" in w]
    print(f"recompile-limit warnings: {len(limit)}" + (f" ({limit[0]})" if limit else ""))
    if limit:
        raise SystemExit(1)


def trial_memory(steps: int) -> None:
    from search.runner.messages import Finished
    from search.runner.worker import TrialSession, TrialSpec

    spec = TrialSpec(
        study="gpu-check",
        number=0,
        schedule="1x2,2x2,4x2",
        model=_model(),
        train=TrainConfig(steps=steps, batch_size=16, warmup_steps=2, eval_every=max(1, steps // 2), eval_batches=2, device=_device()),
        corpus="shakespeare",
        val_fraction=0.1,
        corpus_fingerprint=load_corpus().fingerprint,
        baseline="4x6",
        probe_steps=8,
        gpus=0.5 if torch.cuda.is_available() else 0.0,
    )
    session = TrialSession()
    print(f"device {spec.train.device}; before: {_memory()}")
    session.start(spec)
    print(f"model built: {_memory()}")
    while not isinstance(out := session.advance(), Finished):
        print(f"step {out.point.step}: {_memory()}")
    print(f"finished, probes run: {_memory()}; throughput ratio {out.result.extra.get('throughput_ratio', float('nan')):.3f}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("step", choices=["compile", "trial-memory"])
    p.add_argument("--steps", type=int, default=20)
    args = p.parse_args()
    compile_check(args.steps) if args.step == "compile" else trial_memory(args.steps)


if __name__ == "__main__":
    main()
