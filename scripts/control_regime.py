"""The positive control: a synthetic task on which the head count of a layer matters, measured paired to uniform.

    .venv/bin/python scripts/control_regime.py            # the committed regime: docs/results/control.{json,md}

Trains every schedule at every seed with prism's own Trainer (one torch thread a run, `--workers` runs at once,
each at nice 10), on a task of prism.tasks: the same seed gives every schedule the same initial weights and training
sequences, and every run meets the same validation sequences. Reports the task's trivial floor (guessing among the
symbols of the sequence, no look-up), each schedule's final validation loss (nats per answer token), and each
schedule's paired gap to the baseline: mean [95% t interval] on n-1 df, the seeds it wins, the paired t p and the
Holm-adjusted p over the family of every schedule compared with the baseline (search.analysis.stats).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

import numpy as np

from prism import ModelConfig, Schedule, TrainConfig, corpus_vocab, load_corpus
from search.analysis.stats import holm, paired_contrast
from search.config import default_baseline_heads
from search.text import p_text

# The regime: pointer look-up through a two-digit address into a table of 16 symbols, d_model 32, two layers.
DEFAULT_SCHEDULES = ("2,2", "1,1", "4,4", "8,8", "8,1", "1,8")


def model_config(args: argparse.Namespace, vocab_size: int) -> ModelConfig:
    return ModelConfig(
        vocab_size=vocab_size,
        n_layer=args.n_layer,
        d_model=args.d_model,
        block_size=args.block_size,
        dh_min=args.dh_min,
        dh_max=args.d_model,
        positions=args.positions,
    )


def train_config(args: argparse.Namespace, seed: int) -> TrainConfig:
    return TrainConfig(
        steps=args.steps,
        batch_size=args.batch_size,
        lr=args.lr,
        warmup_steps=args.warmup_steps,
        eval_every=args.eval_every,
        eval_batches=args.eval_batches,
        seed=seed,
        precision="fp32",
    )


def _quiet_worker() -> None:
    os.nice(10)  # the machine is shared: training yields to interactive work


def run(args: argparse.Namespace, schedule: str, seed: int) -> dict:
    """One training run in a worker process: its final validation loss and learning curve."""
    import torch

    from prism import Trainer

    torch.set_num_threads(1)
    corpus = load_corpus(args.task)
    trainer = Trainer(model_config(args, corpus.vocab_size), Schedule.parse(schedule, args.n_layer), train_config(args, seed), corpus)
    while not trainer.done:
        trainer.run_to_next_eval()
    result = trainer.result()
    return {
        "schedule": schedule,
        "seed": seed,
        "val_loss": result.final_val_loss,
        "curve": [[p.step, p.val_loss] for p in result.curve],
        "wall_s": result.wall_time_s,
    }


def floors(args: argparse.Namespace) -> dict[str, float]:
    """On the validation sequences every run is scored on: the task's trivial floor and, for a pointer task, the loss
    of a look-up that reads the address's last digit only (guessing among the table entries that share it)."""
    from prism import val_batches
    from prism.tasks import IGNORE, PointerTask

    corpus = load_corpus(args.task)
    assert corpus.task is not None, f"{args.task} is not a task"
    batches = val_batches(corpus, args.block_size, args.batch_size, args.eval_batches)
    inputs, targets = (np.concatenate([b[i].numpy() for b in batches]) for i in (0, 1))
    result = {"trivial": corpus.task.floor(inputs, targets)}
    task = corpus.task
    if isinstance(task, PointerTask) and task.digits > 1:
        losses = []
        for row, target in zip(inputs, targets):
            table = row[: task.context_length]
            for at in np.flatnonzero(target != IGNORE):
                sharing = table[row[at] - task.symbols :: task.base]  # entries whose index ends in that digit
                losses.append(-np.log(np.mean(sharing == target[at])))
        result["last_digit_only"] = float(np.mean(losses))
    return result


def summarise(runs: list[dict], schedules: list[str], baseline: str) -> list[dict]:
    """Per schedule: mean loss, and its paired gap to the baseline with interval, wins and Holm-adjusted p."""
    loss = {(r["schedule"], r["seed"]): r["val_loss"] for r in runs}
    seeds = sorted({r["seed"] for r in runs})
    rows = []
    for schedule in schedules:
        diffs = [loss[schedule, s] - loss[baseline, s] for s in seeds]
        row: dict = {"schedule": schedule, "mean_loss": statistics.fmean(loss[schedule, s] for s in seeds), "gaps": diffs}
        c = paired_contrast(diffs) if schedule != baseline else None
        if c is not None and c.measured:
            low, high = c.interval()
            row |= {"gap": c.mean, "low": low, "high": high, "df": c.df, "p": c.p, "wins": sum(d < 0 for d in diffs)}
        rows.append(row)
    compared = [r for r in rows if "p" in r]
    for row, adjusted in zip(compared, holm([r["p"] for r in compared])):
        row["holm_p"] = adjusted
    return rows


def markdown(result: dict) -> str:
    a, runs = result["args"], result["runs"]
    schedules = list(dict.fromkeys(r["schedule"] for r in runs))
    means = {s: statistics.fmean(r["val_loss"] for r in runs if r["schedule"] == s) for s in schedules}
    best = min(schedules, key=means.__getitem__)
    uniform = [s for s in schedules if Schedule.parse(s).is_uniform]
    best_uniform = min(uniform, key=means.__getitem__)
    lines = [
        "<!-- written by scripts/control_regime.py; do not edit by hand -->",
        "# Positive control: a regime where a layer's head count matters",
        "",
        f"Command: `{result['command']}`  ",
        f"Wall time: {result['wall_s'] / 60:.1f} min ({a['workers']} runs at once, one torch thread each, nice 10, "
        "on the shared 2-core machine).",
        "",
        f"Task `{a['task']}`, d_model {a['d_model']}, {a['n_layer']} layers, block {a['block_size']}, positions {a['positions']}, "
        f"{a['steps']} steps of batch {a['batch_size']}, AdamW lr {a['lr']} (warm-up {a['warmup_steps']}, cosine). "
        f"Seeds {', '.join(map(str, result['seeds']))}; losses are nats per answer token on fixed validation sequences "
        f"({a['eval_batches']} batches of {a['batch_size']}).",
        "",
        f"Trivial floor (guessing among the sequence's symbols in proportion to their counts, no look-up): "
        f"{result['floors']['trivial']:.4f}. "
        + (
            f"A look-up that reads only the address's last digit (guessing among the table entries sharing it) scores "
            f"{result['floors']['last_digit_only']:.4f}. "
            if "last_digit_only" in result["floors"]
            else ""
        )
        + f"Best schedule by mean: `{best}` at {means[best]:.4f} ({'uniform' if best in uniform else 'not uniform'}).",
        "",
        *_table(summarise(runs, schedules, result["baseline"]), result["baseline"], "the uniform baseline"),
    ]
    if best_uniform != result["baseline"]:
        lines += ["", *_table(summarise(runs, schedules, best_uniform), best_uniform, "the best uniform schedule by mean")]
    return "\n".join(lines) + "\n"


def _table(rows: list[dict], baseline: str, words: str) -> list[str]:
    lines = [
        f"Paired gaps to `{baseline}`, {words} (negative: better; Holm over the {len(rows) - 1} schedules compared):",
        "",
        f"| schedule | mean val loss | gap to `{baseline}` [95% t interval] | wins | p | Holm p | gap at each seed |",
        "|---|---:|---|---:|---:|---:|---|",
    ]
    for r in sorted(rows, key=lambda r: r["mean_loss"]):
        per_seed = ", ".join(f"{g:+.3f}" for g in r["gaps"])
        if r["schedule"] == baseline:
            cells = ["(baseline)", "", "", "", ""]
        elif "p" in r:
            gap = f"{r['gap']:+.4f} [{r['low']:+.4f}, {r['high']:+.4f}] ({r['df']} df)"
            cells = [gap, f"{r['wins']}/{len(r['gaps'])}", p_text(r["p"]), p_text(r["holm_p"]), per_seed]
        else:  # too few pairs for an interval
            cells = [f"{statistics.fmean(r['gaps']):+.4f}", "", "", "", per_seed]
        lines.append(f"| `{r['schedule']}` | {r['mean_loss']:.4f} | " + " | ".join(cells) + " |")
    return lines


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--task", default="pointer:digits=2,base=4,symbols=16")
    p.add_argument("--d-model", type=int, default=32)
    p.add_argument("--n-layer", type=int, default=2)
    p.add_argument("--block-size", type=int, default=64)
    p.add_argument("--dh-min", type=int, default=4)
    p.add_argument("--positions", default="learned")
    p.add_argument("--steps", type=int, default=800)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=1e-2)
    p.add_argument("--warmup-steps", type=int, default=40)
    p.add_argument("--eval-every", type=int, default=200)
    p.add_argument("--eval-batches", type=int, default=8)
    p.add_argument("--schedules", nargs="+", default=list(DEFAULT_SCHEDULES), help="per-layer head counts, e.g. 2,1")
    p.add_argument("--baseline", help="the uniform schedule every gap is paired with (default: a study's, head dim 64 or nearest)")
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--out", default="docs/results/control", help="writes OUT.json and OUT.md")
    p.add_argument("--rewrite", action="store_true", help="train nothing: rewrite OUT.md (and the floors) from OUT.json's runs")
    args = p.parse_args()
    out = Path(args.out)
    if args.rewrite:
        result = json.loads(out.with_suffix(".json").read_text())
        if args.baseline:  # the same runs, paired with another of their uniform schedules
            result["baseline"] = str(Schedule.parse(args.baseline, result["args"]["n_layer"]))
        result["floors"] = floors(argparse.Namespace(**result["args"]))
        result.pop("floor", None)
        result.pop("schedules", None)  # the gaps are computed from the runs when written
        write(out, result)
        return
    schedules = [str(Schedule.parse(s, args.n_layer)) for s in args.schedules]
    default = Schedule.uniform(default_baseline_heads(model_config(args, corpus_vocab(args.task))), args.n_layer)
    baseline = str(Schedule.parse(args.baseline, args.n_layer) if args.baseline else default)
    if baseline not in schedules:
        schedules.insert(0, baseline)
    started = time.perf_counter()
    jobs = [(s, seed) for seed in args.seeds for s in schedules]  # seed-major: a stopped run still has whole pairs
    with ProcessPoolExecutor(args.workers, mp_context=get_context("spawn"), initializer=_quiet_worker) as pool:
        futures = [pool.submit(run, args, s, seed) for s, seed in jobs]
        runs = []
        for future in futures:
            runs.append(future.result())
            r = runs[-1]
            print(f"{r['schedule']:>8} seed {r['seed']}: {r['val_loss']:.4f} ({r['wall_s']:.0f} s)", flush=True)
    result = {
        "command": shlex.join([Path(sys.executable).name, *sys.argv]),
        "wall_s": time.perf_counter() - started,
        "args": vars(args),
        "seeds": args.seeds,
        "baseline": baseline,
        "floors": floors(args),
        "runs": runs,
    }
    write(out, result)


def write(out: Path, result: dict) -> None:
    out.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
    out.with_suffix(".md").write_text(markdown(result))
    print(markdown(result))


if __name__ == "__main__":
    main()
