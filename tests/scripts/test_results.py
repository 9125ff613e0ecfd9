"""scripts/results.py regenerates docs/results.md's tables and figures from a study database: run for real on a
constructed bench-main study with known answers (the statistics themselves are tested in tests/search/test_stats.py)."""

import json
import subprocess
import sys
from pathlib import Path

import optuna
import pytest
from optuna.distributions import FloatDistribution

from search.attrs import ATTR_CONFIG
from search.config import load_config

ROOT = Path(__file__).resolve().parents[2]
UNIFORM = "1x3"  # studies/tiny.toml's baseline


def add(study, schedule, seed, final, role="search"):
    study.add_trial(
        optuna.trial.create_trial(
            value=final,
            params={"x": 0.0},
            distributions={"x": FloatDistribution(0, 1)},
            user_attrs={"schedule": schedule, "seed": seed, "role": role, "throughput_ratio": 1.0},
            intermediate_values={100: final + 0.5, 200: final},
        )
    )


@pytest.mark.e2e
def test_tables_and_figures_from_a_constructed_study(tmp_path):
    db = tmp_path / "bench.db"
    config = load_config(ROOT / "studies" / "tiny.toml").model_copy(update={"name": "bench-main"})
    study = optuna.create_study(study_name="bench-main", storage=f"sqlite:///{db}")
    study.set_user_attr(ATTR_CONFIG, config.model_dump_json())
    add(study, UNIFORM, 0, 2.05, role="baseline")
    add(study, "4x3", 0, 2.00)  # best at the search seed (gap -0.05), then -0.01, -0.02, -0.03 on fresh seeds
    add(study, "2x3", 0, 2.10)
    add(study, "2x3", 0, 2.10)  # a duplicate-cache hit of the same (schedule, seed): counted once
    for seed, base, best in ((1000, 1.50, 1.49), (1001, 1.60, 1.58), (1002, 1.70, 1.67)):
        add(study, UNIFORM, seed, base, role="confirm")
        add(study, "4x3", seed, best, role="confirm")
    free = optuna.create_study(study_name="bench-free", storage=f"sqlite:///{db}")
    free.set_user_attr(ATTR_CONFIG, config.model_copy(update={"name": "bench-free"}).model_dump_json())
    add(free, UNIFORM, 0, 2.05, role="baseline")
    add(free, "4x1,2x2", 0, 2.01)  # not monotone, the free search's best at seed 0
    add(free, "1x1,2x2", 0, 2.03)
    for seed, base, best in ((1000, 1.50, 1.51), (1001, 1.60, 1.59), (1002, 1.70, 1.71)):  # gaps +0.01, -0.01, +0.01
        add(free, UNIFORM, seed, base, role="confirm")  # the same runs as bench-main's uniform at these seeds
        add(free, "4x1,2x2", seed, best, role="confirm")
    wide = optuna.create_study(study_name="bench-width", storage=f"sqlite:///{db}")
    wide.set_user_attr(ATTR_CONFIG, config.model_copy(update={"name": "bench-width"}).model_dump_json())
    for seed, base, best, worst in ((0, 1.90, 1.88, 1.95), (1, 1.92, 1.91, 1.99)):  # bench-main's order again
        add(wide, UNIFORM, seed, base, role="baseline")
        add(wide, "4x3", seed, best, role="reference")
        add(wide, "2x3", seed, worst, role="reference")
    profile = [{"layer": i, "mad": 1.0 + i, "mad_relative": 0.1 * i} for i in range(3)]
    (tmp_path / "attention.json").write_text(json.dumps({UNIFORM: {"seed": 0, "val_loss": 2.05, "layers": profile}}))
    before = db.read_bytes()

    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "scripts/results.py", "--db", str(db), "--out", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert db.read_bytes() == before  # reading never writes the committed database
    tables = (out / "tables.md").read_text()
    assert tables == proc.stdout
    # 4x3 over its 4 pairs: mean of -0.05, -0.01, -0.02, -0.03
    assert "| `4x3` | 4 | 1.6850 ± 0.2225 | -0.0275 [" in tables
    # 2x3 ran at seed 0 only: the blocked model still gives it an interval from the variance pooled over 4x3's pairs
    assert "| `2x3` | 1 | 2.1000 | +0.0613 [+0.0123, +0.1102] (n=1, p=0.028, adjusted p=0.057) | inside the noise |" in tables
    assert "- **bench-main**: undecided at margin 0.01: best other schedule by mean 4x3 -0.0275 [-0.0547, -0.0003] on 4 seeds" in tables
    # selected on seed 0, judged on 1000-1002 only: -0.02 [-0.0448, +0.0048], p 0.074 -> inside the noise
    assert "selected: `4x3`, best of 2 schedules at the search seed 0" in tables
    assert "-0.0200 [-0.0448, +0.0048] (n=3, p=0.074, adjusted p=0.074), verdict: **inside the noise**" in tables
    # within seeds: only seed 0 has 3 runs; a perfect ranking of 3 happens by chance once in 3! = 6 orders
    assert "| 100 | rho +1.00 (n=3, exact permutation p=0.17) | 3 | 1 | `4x3` kept |" in tables
    assert "pending: study bench-long has not run yet" in tables
    assert "Spearman rho +1.00 (n=3, exact permutation p=0.17) over 3 schedules; order in bench-width: `4x3`, `1x3`, `2x3`" in tables
    assert "| 1 | `4x3` | 2 | 1.8950 ± 0.0212 | -0.0150 [-0.0454, +0.0154] (n=2, p=0.17, adjusted p=0.17) |" in tables
    assert "Rank agreement per rung inside bench-width:\n\n| tokens |" in tables
    # bench-free: selected at seed 0, judged on 1000-1002; against bench-main's 4x3 (gaps -0.01, -0.02, -0.03 there)
    # as a difference of paired gaps: +0.02, +0.01, +0.04 -> mean +0.0233, t interval with 2 df
    assert "- selected: `4x1,2x2` (not monotone), best of 2 schedules at the search seed 0; 2 of the 3 schedules" in tables
    assert "- its gap to uniform on the seeds it was not selected on: +0.0033 [-0.0254, +0.0320] (n=3, p=0.67, adjusted p=0.67)" in tables
    assert "- runs in both bench-free and bench-main (same schedule and seed): 4, largest difference 0.0e+00 (identical" in tables
    assert "  - `1x3` seed 1000: bench-main 1.500000 (tokens/s not recorded), bench-free 1.500000 (tokens/s not recorded)" in tables
    assert "| 1.000 | 0: -0.0500, 1000: -0.0100, 1001: -0.0200, 1002: -0.0300 |" in tables  # 4x3's gap at each seed
    assert "schedule `4x3` on the fresh seeds (difference of the paired gaps to uniform): +0.0233 [-0.0146, +0.0613] (n=3" in tables
    assert (
        "- both studies at seed 0: 5 distinct schedules, 4 monotone; the best ten: `4x3` 2.0000, `4x1,2x2` 2.0100 (not monotone), "
        "`1x1,2x2` 2.0300, `1x3` 2.0500, `2x3` 2.1000"
    ) in tables
    assert "| `1x3` (seed 0) | 2.0500 | 1.0 (0.00) | 2.0 (0.10) | 3.0 (0.20) |" in tables
    assert {p.name for p in out.glob("*.png")} == {"gaps.png", "rungs.png", "transfer.png", "attention.png"}
