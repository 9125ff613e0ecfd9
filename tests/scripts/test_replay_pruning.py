"""`min_resource_evals = "auto"` replayed on the committed benchmark studies never cuts the best schedule by mean."""

import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_auto_pruning_never_cuts_the_best_schedule_by_mean_on_the_benchmarks():
    out = subprocess.run(
        [sys.executable, "scripts/replay_pruning.py"], cwd=ROOT, capture_output=True, text=True, check=True, timeout=600
    ).stdout
    rows = {line.split("|")[1].strip(): line for line in out.splitlines()[2:]}
    assert set(rows) == {"bench-main", "bench-long", "bench-width"}
    assert all("never cut" in row for row in rows.values()), out
    assert "from 1,638,400 tokens (80%)" in rows["bench-main"]  # the first rung whose within-seed rho is reliably high
    assert "never (no rung ranked reliably)" in rows["bench-width"] and "0.0% saved" in rows["bench-width"]
