"""Training-step overhead of `prism.Trainer` against a minimal nanoGPT-style loop doing the same work.

Both sides build the same `PrismLM` with the same seed, the same AdamW groups and settings, the same warmup +
cosine learning rate, the same gradient clipping and the same batches (the minimal loop cuts nanoGPT-style
windows from the same seeded generator), in fp32 on the same device. They advance in lockstep, so after every
round both models hold identical weights; the script checks that their losses agree, i.e. that the timed work
is the same. Rounds alternate which side goes first; each round's ratio is the Trainer's tokens/s over the
minimal loop's, and the script prints the median ratio with its distribution-free 95% interval (the helper
of bench_throughput.py), by the wall clock and by the process's CPU time. Only training steps are timed, after
warm-up steps on both sides.

    python scripts/bench_train_loop.py                      # 4 layers, d_model 128, T 64, batch 16, CPU
    python scripts/bench_train_loop.py --threads 1 --profile 50   # then cProfile 50 steps of each side
"""

from __future__ import annotations

import argparse
import cProfile
import os
import platform
import pstats
import shlex
import statistics
import sys
import time

import numpy as np
import torch
from bench_throughput import _median_ci  # scripts/ is on sys.path when this file runs as a script
from reference_gpt import ReferenceLoop

from prism import ModelConfig, PrismLM, Schedule, TrainConfig, Trainer, load_corpus


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n-layer", type=int, default=4)
    p.add_argument("--d-model", type=int, default=128)
    p.add_argument("--block-size", type=int, default=64)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--steps", type=int, default=10, help="timed steps per side per round")
    p.add_argument("--warmup", type=int, default=10, help="untimed steps per side before the first round")
    p.add_argument("--rounds", type=int, default=60)
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    p.add_argument("--profile", type=int, default=0, metavar="STEPS", help="then cProfile STEPS steps of each side")
    return p.parse_args()


def minimal_loop(cfg: ModelConfig, schedule: Schedule, tcfg: TrainConfig, data: np.ndarray) -> ReferenceLoop:
    """nanoGPT's train.py loop (scripts/reference_gpt.py) around the same PrismLM, with the Trainer's AdamW,
    fed nanoGPT-style batches cut from the generator train_batches draws its window starts from."""

    def batches():
        rng, T = np.random.default_rng(tcfg.seed), cfg.block_size
        while True:
            ix = rng.integers(0, len(data) - T - 1, size=tcfg.batch_size)
            x = torch.stack([torch.from_numpy(data[i : i + T].astype(np.int64)) for i in ix])
            y = torch.stack([torch.from_numpy(data[i + 1 : i + 1 + T].astype(np.int64)) for i in ix])
            yield x, y

    torch.manual_seed(tcfg.seed)
    fused = tcfg.fused_adamw == "always" or None  # the Trainer's AdamW kernel (None: fused on CUDA only)
    return ReferenceLoop(PrismLM(cfg, schedule), batches(), tcfg, fused=fused)


def _timed(side, steps: int) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds of this process, last loss) of `steps` training steps. On a loaded machine the CPU
    time is the steadier clock: it leaves out the time the process waited for a core (exact with --threads 1)."""
    wall, cpu = time.perf_counter(), time.process_time()
    loss = side.train_steps(steps)
    return time.perf_counter() - wall, time.process_time() - cpu, loss


def main() -> None:
    args = _args()
    if args.threads:
        torch.set_num_threads(args.threads)
    load_before = os.getloadavg()
    cfg = ModelConfig(n_layer=args.n_layer, d_model=args.d_model, block_size=args.block_size)
    schedule = Schedule.uniform(args.d_model // 64, args.n_layer)  # head dim 64, the uniform baseline
    total = args.warmup + args.rounds * args.steps + args.profile
    tcfg = TrainConfig(
        steps=total + 1, batch_size=args.batch_size, warmup_steps=min(40, total), eval_batches=1, device="cpu", precision="fp32"
    )
    corpus = load_corpus()
    trainer = Trainer(cfg, schedule, tcfg, corpus)
    minimal = minimal_loop(cfg, schedule, tcfg, corpus.train)
    sides = {"trainer": trainer, "minimal": minimal}
    for side in sides.values():
        side.train_steps(args.warmup)
    seconds = {clock: {name: [] for name in sides} for clock in ("wall", "cpu")}
    for r in range(args.rounds):
        losses = {}
        for name in ("trainer", "minimal") if r % 2 == 0 else ("minimal", "trainer"):
            wall, cpu, losses[name] = _timed(sides[name], args.steps)
            seconds["wall"][name].append(wall)
            seconds["cpu"][name].append(cpu)
        if losses["trainer"] != losses["minimal"]:
            sys.exit(f"round {r}: the loops diverged (loss {losses['trainer']} vs {losses['minimal']}); they do not do the same work")
    tokens = args.steps * args.batch_size * args.block_size
    print(f"command: python {' '.join(shlex.quote(a) for a in sys.argv)}")
    print(
        f"device: cpu ({platform.processor() or 'cpu'}, {torch.get_num_threads()} threads); fp32; torch {torch.__version__}; "
        f"load average before/after: {load_before[0]:.2f} / {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores"
    )
    print(
        f"model: {cfg.n_layer} layers x d_model {cfg.d_model}, {schedule} (uniform), T={cfg.block_size}, batch {args.batch_size}; "
        f"{args.rounds} alternating rounds x {args.steps} steps per side after {args.warmup} warm-up steps; "
        f"losses identical every round"
    )
    for clock, per_side in seconds.items():
        ratios = [m / t for t, m in zip(per_side["trainer"], per_side["minimal"])]  # Trainer tokens/s over minimal's
        median, low, high, coverage = _median_ci(ratios)
        print(
            f"{clock} clock: "
            + ", ".join(
                f"{name} {1000 * statistics.median(s) / args.steps:.2f} ms/step ({tokens / statistics.median(s):,.0f} tokens/s)"
                for name, s in per_side.items()
            )
        )
        print(
            f"  ratio Trainer/minimal tokens/s: median {median:.3f}, 95% CI {low:.3f}..{high:.3f}"
            f"{'' if coverage >= 0.95 else f' ({coverage:.0%} coverage)'}, min..max {min(ratios):.3f}..{max(ratios):.3f}"
        )
    for name, side in sides.items() if args.profile else ():
        profiler = cProfile.Profile()
        profiler.runcall(side.train_steps, args.profile)
        stats = pstats.Stats(profiler)
        print(f"\n{name}: {stats.total_calls / args.profile:.0f} Python-level calls per step; top entries by own time")
        stats.sort_stats("tottime").print_stats(15)


if __name__ == "__main__":
    main()
