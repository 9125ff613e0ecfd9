"""scripts/prereg_fragility.py on the committed databases: it reads them without writing, and its summary of the
one-pair deletions agrees with the deletions it lists."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DBS = [ROOT / "docs" / "results" / name for name in ("prereg.db", "bench.db")]


def test_the_fragility_report_reads_the_committed_databases_unchanged():
    before = [db.read_bytes() for db in DBS]
    proc = subprocess.run([sys.executable, "scripts/prereg_fragility.py"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert [db.read_bytes() for db in DBS] == before
    out = proc.stdout
    deletions = re.findall(r"^  without seed (\d+) .*: (better|worse|undecided|equivalent)$", out, re.MULTILINE)
    assert len(deletions) == 20  # one per pair of the last look
    lost = [seed for seed, outcome in deletions if outcome != "better"]
    summary = re.search(r"(\d+) of 20 deletions leave no difference shown at [\d.]+ \((\d+) undecided, (\d+) equivalent by TOST\)", out)
    assert summary is not None, out
    assert int(summary[1]) == len(lost) and int(summary[2]) == sum(o == "undecided" for _, o in deletions)
    assert "exact Wilcoxon signed-rank on all 20 pairs" in out and "one-way ANOVA of the gaps over the 5 machines" in out
