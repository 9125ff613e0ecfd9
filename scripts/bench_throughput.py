"""Training throughput and peak memory of Prism schedules against the uniform baseline at the same d_model.

Every schedule trains through the real `prism.Trainer` step (same data stream, optimizer, autocast), built with
the same seed. Rounds interleave the schedules (rotating the order each round) so machine load hits all of them
alike; each round's tokens/s is divided by the uniform model's in that same round, and the table reports the
median of those per-round ratios with its distribution-free 95% interval (below 6 rounds: min..max and its
lower coverage), their min..max, and whether the schedule meets the target (>= 0.98x: the whole interval
above it), misses it (the whole interval below) or is inside the noise.

Peak memory: CUDA's max_memory_allocated per schedule; on CPU the growth of resident memory in a child process
from "torch imported" to "trainer built and a few steps run" (model, optimizer state, gradients and what the
allocator keeps; not a true activation peak).

`--reference` instead times uniform Prism (the real `Trainer`, head dim 64) against a plain nanoGPT-style GPT-2 of
the same shape, GELU, initial weights, batches, optimizer and clipping (scripts/reference_gpt.py), twice: with
nanoGPT's optimizer rule (fused AdamW on CUDA only) and with fused AdamW everywhere (Prism's default, so the same
arithmetic as Prism's). Rounds rotate the order, and each round's Prism tokens/s over a reference's gives a paired
ratio, by the wall clock and by the CPU time.

`--kernel` also times fused attention alone (SDPA forward + backward at the same B, T, d_model) for every
allowed head dim, and a "predicted from SDPA" column: the uniform step time with each layer's attention
swapped for that schedule's head dim. Where predicted and measured ratios agree, the attention kernel
explains the gap (the projections and MLP do the same matmuls in every schedule).

    python scripts/bench_throughput.py                      # CPU, fp32 (CUDA + bf16 autocast when present)
    python scripts/bench_throughput.py --d-model 768 --n-layer 12 --block-size 1024 --device cuda
    bash scripts/gpu_check.sh                               # the prepared GPU run: CUDA tests + eager/compiled bench
    python scripts/bench_throughput.py --reference --n-layer 4 --block-size 64 --rounds 40   # Prism vs plain GPT-2
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import platform
import shlex
import statistics
import sys
import time

import numpy as np
import scipy.stats
import torch
from reference_gpt import GPT, ReferenceLoop  # scripts/ is on sys.path when this file runs as a script

from prism import Corpus, ModelConfig, Schedule, TrainConfig, Trainer, allowed_head_counts, load_corpus, train_batches, validate
from prism.config import MAX_STEPS
from prism.training import autocast_dtype, capability_of


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
    p.add_argument("--precision", default="auto", choices=["auto", "fp32", "bf16", "fp16"])
    p.add_argument("--compile", action="store_true")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    p.add_argument("--no-memory", action="store_true", help="skip the per-schedule memory probes (each builds the model again)")
    p.add_argument("--kernel", action="store_true", help="also time SDPA alone per head dim")
    p.add_argument("--reference", action="store_true", help="time uniform Prism against a plain GPT-2 instead")
    p.add_argument("--mlp", default=ModelConfig.mlp, choices=["gelu-exact", "gelu"], help="--reference: the GELU of both sides")
    p.add_argument("--fused-adamw", default=TrainConfig.fused_adamw, choices=["always", "cuda"], help="--reference: Prism's AdamW")
    return p.parse_args()


def _default_schedules(cfg: ModelConfig, baseline: Schedule) -> list[Schedule]:
    counts, L = allowed_head_counts(cfg), cfg.n_layer
    third = max(1, L // 3)
    ramp = Schedule(tuple(counts[min(len(counts) - 1, i * len(counts) // L)] for i in range(L)))
    out = [
        baseline,
        Schedule.uniform(counts[0], L),
        Schedule.uniform(counts[-1], L),
        ramp,
        Schedule(tuple(reversed(ramp.heads))),
        Schedule((counts[0],) * third + (baseline.heads[0],) * (L - third)),
    ]
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
    trainer.train_steps(steps)
    _sync(trainer.cfg.device)
    return steps * trainer.tokens_per_step / (time.perf_counter() - start)


def _cpu_peak_rss(cfg: ModelConfig, schedule: Schedule, tcfg: TrainConfig, steps: int, threads: int | None, q) -> None:
    if threads:
        torch.set_num_threads(threads)
    corpus = Corpus("probe", np.random.default_rng(0).integers(0, 256, 200_000, dtype=np.uint8), 256)
    before = _rss_mib()
    trainer = Trainer(cfg, schedule, tcfg, corpus)
    _timed(trainer, steps)
    q.put(_rss_mib() - before)


def _rss_mib() -> float:
    """Resident memory now. Not the high-water mark: importing torch sets that above any small model's peak."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


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


def _reference_main(args: argparse.Namespace, cfg: ModelConfig, tcfg: TrainConfig) -> None:
    """Uniform Prism's Trainer against the plain GPT-2 (nanoGPT's optimizer rule, and fused AdamW), rotating rounds,
    paired ratios."""
    corpus, heads = load_corpus(), cfg.d_model // 64
    activation = "tanh" if cfg.mlp == "gelu" else "none"
    sides: dict[str, Trainer | ReferenceLoop] = {"prism": Trainer(cfg, Schedule.uniform(heads, cfg.n_layer), tcfg, corpus)}
    for name, fused in (("nanogpt", None), ("nanogpt-fused", True)):
        torch.manual_seed(tcfg.seed)  # the same initial weights as the Prism model (tests/scripts check it)
        gpt = GPT(cfg.vocab_size, cfg.block_size, cfg.n_layer, cfg.d_model, heads, activation)
        batches = train_batches(corpus, cfg.block_size, tcfg.batch_size, tcfg.seed)  # the Trainer's batches
        sides[name] = ReferenceLoop(gpt, batches, tcfg, args.device, fused=fused)
    for side in sides.values():
        side.train_steps(args.warmup)
    seconds: dict[str, dict[str, list[float]]] = {clock: {name: [] for name in sides} for clock in ("wall", "cpu")}
    names = list(sides)
    for r in range(args.rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            _sync(args.device)
            wall, cpu = time.perf_counter(), time.process_time()
            sides[name].train_steps(args.steps)
            _sync(args.device)
            seconds["wall"][name].append(time.perf_counter() - wall)
            seconds["cpu"][name].append(time.process_time() - cpu)
    tokens = args.steps * args.batch_size * cfg.block_size
    print(f"command: python {' '.join(shlex.quote(a) for a in sys.argv)}")
    print(
        f"device: {args.device} ({platform.processor() or 'cpu'}, {torch.get_num_threads()} threads); fp32; torch {torch.__version__}; "
        f"load average before/after: {_load_before[0]:.2f} / {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores"
    )
    print(
        f"model: {cfg.n_layer} layers x d_model {cfg.d_model}, {heads} heads, T={cfg.block_size}, batch {args.batch_size}, "
        f"mlp {cfg.mlp!r} on both sides, Prism fused_adamw {tcfg.fused_adamw!r}; "
        f"{args.rounds} rotating rounds x {args.steps} steps per side after {args.warmup} warm-up steps\n"
    )
    print("| reference | clock | ms/step Prism / reference (medians) | ratio Prism / reference tokens/s: median | 95% CI | min..max |")
    print("|---|---|---|---:|---|---|")
    for name in names[1:]:
        for clock, per_side in seconds.items():
            ratios = [ref / prism for prism, ref in zip(per_side["prism"], per_side[name])]
            median, low, high, coverage = _median_ci(ratios)
            covered = "" if coverage >= 0.95 else f" ({coverage:.0%})"
            ms = " / ".join(f"{1000 * statistics.median(per_side[n]) / args.steps:.2f}" for n in ("prism", name))
            print(f"| {name} | {clock} | {ms} | {median:.3f} | {low:.3f}..{high:.3f}{covered} | {min(ratios):.3f}..{max(ratios):.3f} |")
    print(f"\n(tokens per round and side: {tokens:,}; nanogpt: fused AdamW on CUDA only, nanoGPT's rule; nanogpt-fused: fused everywhere)")


def _timed_steps(args: argparse.Namespace, **settings) -> TrainConfig:
    """The train config of every timed side: no warmup, one eval batch; `settings` are what the sides differ in."""
    return TrainConfig(steps=MAX_STEPS, batch_size=args.batch_size, warmup_steps=0, eval_batches=1, device=args.device, **settings)


def main() -> None:
    args = _args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.reference:
        cfg = ModelConfig(n_layer=args.n_layer, d_model=args.d_model, block_size=args.block_size, mlp=args.mlp)
        return _reference_main(args, cfg, _timed_steps(args, precision="fp32", fused_adamw=args.fused_adamw))
    cfg = ModelConfig(n_layer=args.n_layer, d_model=args.d_model, block_size=args.block_size, dh_min=args.dh_min, dh_max=args.dh_max)
    counts = allowed_head_counts(cfg)
    baseline = Schedule.uniform(args.baseline_heads or min(counts, key=lambda h: abs(args.d_model // h - 64)), cfg.n_layer)
    schedules = (
        [baseline] + [s for s in (Schedule.parse(t) for t in args.schedules.split(";")) if s != baseline]
        if args.schedules
        else _default_schedules(cfg, baseline)
    )
    for s in schedules:
        validate(s, cfg)
    tcfg = _timed_steps(args, precision=args.precision, compile=args.compile)

    started = time.perf_counter()
    trainers = {s: _trainer(cfg, s, tcfg) for s in schedules}
    for t in trainers.values():
        _timed(t, args.warmup)  # with --compile, this is where each model compiles
    print(f"{len(schedules)} models built and warmed up in {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    tps: dict[Schedule, list[float]] = {s: [] for s in schedules}
    for r in range(args.rounds):
        order = schedules[r % len(schedules) :] + schedules[: r % len(schedules)]
        for s in order:
            tps[s].append(_timed(trainers[s], args.steps))
    del trainers
    kernel = _kernel_times(cfg, args) if args.kernel else None
    memory = {} if args.no_memory else {s: _peak_memory_mib(cfg, s, tcfg, args) for s in schedules}

    dtype = autocast_dtype(args.precision, capability_of(torch.device(args.device)))
    precision = f"{str(dtype).removeprefix('torch.')} autocast" if dtype else "fp32"
    device = (
        torch.cuda.get_device_name()
        if args.device.startswith("cuda")
        else f"{platform.processor() or 'cpu'}, {torch.get_num_threads()} threads"
    )
    print(f"command: python {' '.join(shlex.quote(a) for a in sys.argv)}")
    print(
        f"device: {args.device} ({device}); precision {precision}; torch {torch.__version__}; "
        f"load average before/after: {_load_before[0]:.1f} / {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    )
    print(
        f"model: {cfg.n_layer} layers x d_model {cfg.d_model}, T={cfg.block_size}, batch {args.batch_size}; "
        f"{args.rounds} interleaved rounds x {args.steps} steps after {args.warmup} warm-up steps\n"
    )
    step_s = args.batch_size * cfg.block_size / statistics.median(tps[baseline])  # the uniform model's seconds per step
    print(
        "| schedule | head dims | tokens/s (median) | ratio to uniform (median) | 95% CI | min..max | >= 0.98x? "
        f"|{' predicted from SDPA |' if kernel else ''} peak memory MiB |"
    )
    print(f"|---|---|---:|---:|---|---|---|{'---:|' if kernel else ''}---:|")
    for s in schedules:
        ratios = [a / b for a, b in zip(tps[s], tps[baseline])]
        median, low, high, coverage = _median_ci(ratios)
        verdict = (
            "uniform"
            if s == baseline
            else "too few rounds"
            if coverage < 0.95
            else "yes"
            if low >= TARGET
            else "NO"
            if high < TARGET
            else "inside noise"
        )
        dims = ",".join(str(d) for d in dict.fromkeys(s.head_dims(cfg.d_model)))
        label = f"{s} (uniform)" if s == baseline else str(s)
        predicted = ""
        if kernel:  # the uniform step with each layer's attention swapped for this schedule's head dim
            extra = sum(kernel[d] - kernel[baseline.head_dims(cfg.d_model)[0]] for d in s.head_dims(cfg.d_model))
            predicted = f" {step_s / (step_s + extra):.3f} |"
        mem = f"{memory[s]:.0f}" if s in memory else "-"
        covered = "" if coverage >= 0.95 else f" ({coverage:.0%})"
        print(
            f"| {label} | {dims} | {statistics.median(tps[s]):,.0f} | {median:.3f} | {low:.3f}..{high:.3f}{covered} | "
            f"{min(ratios):.3f}..{max(ratios):.3f} | {verdict} |{predicted} {mem} |"
        )
    if kernel:
        base = baseline.head_dims(cfg.d_model)[0]
        print(
            f"\nSDPA alone (B={args.batch_size}, T={cfg.block_size}, d_model={cfg.d_model}, forward+backward, "
            f"median of {args.rounds} interleaved rounds); the uniform step takes {1000 * step_s:.2f} ms"
        )
        print(f"| head dim | heads | ms per call | time ratio to head dim {base} | share of the uniform step if every layer used it |")
        print("|---:|---:|---:|---:|---:|")
        for d, seconds in kernel.items():
            share = cfg.n_layer * seconds / step_s
            print(f"| {d} | {cfg.d_model // d} | {1000 * seconds:.3f} | {seconds / kernel[base]:.3f} | {share:.1%} |")
    return None


TARGET = 0.98


def _median_ci(ratios: list[float]) -> tuple[float, float, float, float]:
    """Median of the per-round ratios, its distribution-free interval (order statistics; rounds are the paired
    unit) and that interval's coverage: 95% from 6 rounds on, below that min..max and what it covers. Robust to
    the heavy-tailed slow-downs a shared machine gives single rounds."""
    x, n = sorted(ratios), len(ratios)
    j = max([1] + [j for j in range(1, n // 2 + 1) if 2 * scipy.stats.binom.cdf(j - 1, n, 0.5) <= 0.05])
    return statistics.median(x), x[j - 1], x[n - j], 1 - 2 * scipy.stats.binom.cdf(j - 1, n, 0.5)


def _kernel_times(cfg: ModelConfig, args: argparse.Namespace) -> dict[int, float]:
    """Seconds per SDPA forward + backward call for every allowed head dim (same B, T, d_model), interleaved rounds."""
    dims = [cfg.d_model // h for h in allowed_head_counts(cfg)]
    B, T = args.batch_size, cfg.block_size
    dtype = autocast_dtype(args.precision, capability_of(torch.device(args.device))) or torch.float32
    qkv = {
        dh: [torch.randn(B, cfg.d_model // dh, T, dh, device=args.device, dtype=dtype, requires_grad=True) for _ in range(3)] for dh in dims
    }
    calls = args.steps * 5
    times: dict[int, list[float]] = {dh: [] for dh in dims}
    for r in range(args.rounds + 1):
        for dh in dims[r % len(dims) :] + dims[: r % len(dims)]:
            _sync(args.device)
            start = time.perf_counter()
            for _ in range(calls):
                torch.nn.functional.scaled_dot_product_attention(*qkv[dh], is_causal=True).sum().backward()
            _sync(args.device)
            if r:  # round 0 warms up
                times[dh].append((time.perf_counter() - start) / calls)
    return {dh: statistics.median(t) for dh, t in times.items()}


_load_before = os.getloadavg()

if __name__ == "__main__":
    main()
