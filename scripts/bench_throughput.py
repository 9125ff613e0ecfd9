"""Training throughput and peak memory of Prism schedules against the uniform baseline at the same d_model.

Every schedule trains through the real `prism.Trainer` step (same data stream, optimizer, autocast), built with
the same seed. Rounds interleave the schedules (rotating the order each round) so machine load hits all of them
alike; each round's tokens/s is divided by the uniform model's in that same round, and the table reports the
median ratio with its min..max spread over rounds. Peak memory: CUDA's max_memory_allocated per schedule; on
CPU the growth of peak RSS in a child process from "torch imported, corpus loaded" to "trainer built and a
few steps run" (model, optimizer state, activations, allocator slack).

    python scripts/bench_throughput.py                      # CPU, fp32 (CUDA + bf16 autocast when present)
    python scripts/bench_throughput.py --d-model 768 --n-layer 12 --block-size 1024 --device cuda
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import platform
import resource
import shlex
import statistics
import sys
import time

import torch

from prism import ModelConfig, Schedule, TrainConfig, Trainer, allowed_head_counts, load_corpus, validate
from prism.train import _autocast_dtype


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--d-model", type=int, default=128)
    p.add_argument("--n-layer", type=int, default=6)
    p.add_argument("--block-size", type=int, default=128)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--dh-min", type=int, default=32)
    p.add_argument("--dh-max", type=int, default=128)
    p.add_argument("--baseline-heads", type=int, default=None, help="uniform head count (default: head dim 64)")
    p.add_argument("--schedules", default=None, help="';'-separated schedules (default: a few ramps and extremes)")
    p.add_argument("--steps", type=int, default=10, help="timed steps per schedule per round")
    p.add_argument("--warmup", type=int, default=5, help="untimed steps per schedule before the first round")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--precision", default="auto", choices=["auto", "fp32", "bf16"])
    p.add_argument("--compile", action="store_true")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    p.add_argument("--no-memory", action="store_true", help="skip the per-schedule CPU memory probes")
    return p.parse_args()


def _default_schedules(cfg: ModelConfig, baseline: Schedule) -> list[Schedule]:
    counts, L = allowed_head_counts(cfg), cfg.n_layer
    third = max(1, L // 3)
    ramp = Schedule(tuple(counts[min(len(counts) - 1, i * len(counts) // L)] for i in range(L)))
    out = [baseline, Schedule.uniform(counts[0], L), Schedule.uniform(counts[-1], L), ramp,
           Schedule(tuple(reversed(ramp.heads))),
           Schedule((counts[0],) * third + (baseline.heads[0],) * (L - third))]
    return list(dict.fromkeys(out))  # drop duplicates, keep order


def _trainer(cfg: ModelConfig, schedule: Schedule, tcfg: TrainConfig) -> Trainer:
    return Trainer(cfg, schedule, tcfg, load_corpus())


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _timed(trainer: Trainer, steps: int) -> float:
    """tokens/s of `steps` training steps."""
    _sync(trainer.cfg.device)
    start = time.perf_counter()
    for _ in range(steps):
        trainer._train_step()
        trainer.step += 1
    _sync(trainer.cfg.device)
    return steps * trainer.tokens_per_step / (time.perf_counter() - start)


def _cpu_peak_rss(cfg: ModelConfig, schedule: Schedule, tcfg: TrainConfig, steps: int, threads: int | None, q) -> None:
    if threads:
        torch.set_num_threads(threads)
    load_corpus()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    trainer = _trainer(cfg, schedule, tcfg)
    _timed(trainer, steps)
    q.put((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024)  # KiB -> MiB, above the corpus


def _peak_memory_mib(cfg, schedule, tcfg, args) -> float:
    if args.device.startswith("cuda"):
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        trainer = _trainer(cfg, schedule, tcfg)
        _timed(trainer, 3)
        peak = torch.cuda.max_memory_allocated() / 2**20
        del trainer
        return peak
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    proc = ctx.Process(target=_cpu_peak_rss, args=(cfg, schedule, tcfg, 3, args.threads, q))
    proc.start()
    peak = q.get()
    proc.join()
    return peak


def main() -> None:
    args = _args()
    if args.threads:
        torch.set_num_threads(args.threads)
    cfg = ModelConfig(n_layer=args.n_layer, d_model=args.d_model, block_size=args.block_size,
                      dh_min=args.dh_min, dh_max=args.dh_max)
    counts = allowed_head_counts(cfg)
    baseline = Schedule.uniform(args.baseline_heads or min(counts, key=lambda h: abs(args.d_model // h - 64)), cfg.n_layer)
    schedules = [baseline] + [s for s in (Schedule.parse(t) for t in args.schedules.split(";")) if s != baseline] \
        if args.schedules else _default_schedules(cfg, baseline)
    for s in schedules:
        validate(s, cfg)
    tcfg = TrainConfig(steps=10**9, batch_size=args.batch_size, warmup_steps=0, eval_batches=1, device=args.device,
                       precision=args.precision, compile=args.compile)

    trainers = {s: _trainer(cfg, s, tcfg) for s in schedules}
    for t in trainers.values():
        _timed(t, args.warmup)
    tps: dict[Schedule, list[float]] = {s: [] for s in schedules}
    for r in range(args.rounds):
        order = schedules[r % len(schedules):] + schedules[: r % len(schedules)]
        for s in order:
            tps[s].append(_timed(trainers[s], args.steps))
    del trainers
    memory = {} if args.no_memory and not args.device.startswith("cuda") else \
        {s: _peak_memory_mib(cfg, s, tcfg, args) for s in schedules}

    ratios = {s: [a / b for a, b in zip(tps[s], tps[baseline])] for s in schedules}
    precision = "bf16 autocast" if _autocast_dtype(args.precision, torch.device(args.device)) else "fp32"
    device = torch.cuda.get_device_name() if args.device.startswith("cuda") else f"{platform.processor() or 'cpu'}, {torch.get_num_threads()} threads"
    print(f"command: python {' '.join(shlex.quote(a) for a in sys.argv)}")
    print(f"device: {args.device} ({device}); precision {precision}; torch {torch.__version__}; "
          f"load average before/after: {_load_before[0]:.1f} / {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"model: {cfg.n_layer} layers x d_model {cfg.d_model}, T={cfg.block_size}, batch {args.batch_size}; "
          f"{args.rounds} interleaved rounds x {args.steps} steps after {args.warmup} warm-up steps\n")
    print("| schedule | head dims | tokens/s (median) | ratio to uniform: median | min..max | peak memory MiB |")
    print("|---|---|---:|---:|---|---:|")
    for s in schedules:
        dims = ",".join(str(d) for d in dict.fromkeys(s.head_dims(cfg.d_model)))
        mem = f"{memory[s]:.0f}" if s in memory else "-"
        label = f"{s} (uniform)" if s == baseline else str(s)
        print(f"| {label} | {dims} | {statistics.median(tps[s]):,.0f} | {statistics.median(ratios[s]):.3f} | "
              f"{min(ratios[s]):.3f}..{max(ratios[s]):.3f} | {mem} |")


_load_before = os.getloadavg()

if __name__ == "__main__":
    main()
