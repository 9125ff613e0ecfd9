"""scripts/control_regime.py's accounting: paired gaps per seed, Holm over the family, the best uniform as a second
reference, and a committed report that matches the runs it was written from."""

import json
import sys
from pathlib import Path

import pytest
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.weightstats import DescrStatsW

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
control = pytest.importorskip("control_regime")


def _runs(losses: dict[str, list[float]]) -> list[dict]:
    return [{"schedule": s, "seed": seed, "val_loss": v} for s, values in losses.items() for seed, v in enumerate(values)]


LOSSES = {"2x2": [2.0, 2.1, 1.9, 2.05], "8x1,1x1": [1.5, 1.7, 1.45, 1.6], "8x2": [1.6, 1.65, 1.5, 1.62], "1x2": [2.3, 2.2, 2.4, 2.1]}


def test_gaps_are_paired_by_seed_with_a_t_interval_and_holm_over_the_schedules_compared():
    rows = {r["schedule"]: r for r in control.summarise(_runs(LOSSES), list(LOSSES), "2x2")}
    assert "p" not in rows["2x2"]
    diffs = [a - b for a, b in zip(LOSSES["8x1,1x1"], LOSSES["2x2"])]
    stats = DescrStatsW(diffs)
    low, high = stats.tconfint_mean()
    row = rows["8x1,1x1"]
    assert row["gap"] == pytest.approx(stats.mean) and (row["low"], row["high"]) == pytest.approx((low, high))
    assert row["p"] == pytest.approx(stats.ttest_mean()[1]) and row["wins"] == 4 and row["df"] == 3
    compared = ["8x1,1x1", "8x2", "1x2"]
    holm = multipletests([rows[s]["p"] for s in compared], method="holm")[1]
    assert [rows[s]["holm_p"] for s in compared] == pytest.approx(list(holm))


SIZES = ("workers", "d_model", "n_layer", "block_size", "steps", "batch_size", "lr", "warmup_steps", "eval_batches")


def test_the_report_compares_with_the_best_uniform_schedule_when_it_is_not_the_baseline():
    result = {
        "command": "python scripts/control_regime.py",
        "wall_s": 60.0,
        "args": dict.fromkeys(SIZES, 1) | {"task": "pointer", "positions": "learned"},
        "seeds": [0, 1, 2, 3],
        "baseline": "2x2",
        "floors": {"trivial": 2.2},
        "runs": _runs(LOSSES),
    }
    text = control.markdown(result)
    assert "Best schedule by mean: `8x1,1x1` at 1.5625 (not uniform)" in text
    assert "Paired gaps to `2x2`, the uniform baseline" in text
    assert "Paired gaps to `8x2`, the best uniform schedule by mean" in text


def test_the_committed_report_is_the_one_its_runs_write():
    result = json.loads((ROOT / "docs" / "results" / "control.json").read_text())
    assert (ROOT / "docs" / "results" / "control.md").read_text() == control.markdown(result)
    assert len(result["runs"]) == 30 and {r["seed"] for r in result["runs"]} == {0, 1, 2, 3, 4}
