"""scripts/bench_priors.py's ground truth and replay, on constructed tables with known answers (no training)."""

import math
import sys
from pathlib import Path

import pytest

from search.config import load_config

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
bench_priors = pytest.importorskip("bench_priors")


def test_the_noise_margin_is_paired_so_a_shared_seed_effect_cancels():
    seed_effect = [0.0, 1.0, 2.0]  # huge next to the schedule differences: an unpaired margin would swallow them
    table = {}
    for k, shift in enumerate(seed_effect):
        table[("A", k)] = 1.0 + shift
        table[("B", k)] = 1.1 + shift + [0.0, 0.01, -0.01][k]
        table[("C", k)] = 1.2 + shift + [0.02, 0.0, -0.02][k]
    means, margin = bench_priors.truth(table)
    assert means == pytest.approx({"A": 2.0, "B": 2.1, "C": 2.2})
    # paired differences to the best (A): B-A varies by variance 1e-4, C-A by 4e-4; pooled sd sqrt(2.5e-4)
    assert margin == pytest.approx(2 * math.sqrt(2.5e-4) / math.sqrt(3))


def test_replay_counts_the_enqueued_best_for_free_and_the_searched_best_apart(capsys):
    config = load_config(ROOT / "studies" / "tiny.toml")  # 10 monotone schedules, baseline 1x3 enqueued
    schedules = [str(s) for s in config.family.enumerate()]
    searched_best = "2x2,4x1"
    loss = {s: 3.0 + 0.1 * i for i, s in enumerate(sorted(schedules))}
    loss.update({"1x3": 1.0, searched_best: 1.5})  # the baseline is best by far; the best searched one far behind it
    jitter = {(s, k): 0.001 * ((7 * i + 3 * k) % 5) for i, s in enumerate(schedules) for k in range(3)}  # margin ~0.002
    table = {(s, k): loss[s] + jitter[s, k] for s in schedules for k in range(3)}
    bench_priors.replay(config, table, None, ["random"], search_seeds=3, budget=len(schedules))
    rows = {line.split(" | ")[1]: line.split(" | ") for line in capsys.readouterr().out.splitlines() if line.startswith("| random")}
    assert rows["the best schedule"][2] == "1.0"  # the baseline, trained first by every search
    assert rows["within noise of best"][2] == "1.0"
    # the searched best is never found for free: not before the search's own first trial (trial 2)
    assert float(rows["the best searched schedule"][2]) >= 2
    # no searched schedule is within noise of the baseline: never reached, reported as budget + 1
    assert rows["searched, within noise of best"][2] == f"{len(schedules) + 1:.1f}"
