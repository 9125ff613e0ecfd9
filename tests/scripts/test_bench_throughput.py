"""scripts/bench_throughput.py runs end to end on CPU at a toy size, in both modes (scripts/gpu_check.sh and the
reference comparison depend on it): a smoke test of the script, not a timing."""

import subprocess
import sys

from tests.search.conftest import ROOT

TOY = ["--d-model", "64", "--n-layer", "2", "--block-size", "16", "--batch-size", "2", "--steps", "1", "--warmup", "1", "--rounds", "2"]


def _bench(*args: str) -> str:
    result = subprocess.run(
        [sys.executable, "scripts/bench_throughput.py", *TOY, "--threads", "1", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def test_schedule_table():
    out = _bench("--dh-min", "16", "--dh-max", "64", "--schedules", "1x2;4x2", "--no-memory")
    assert "1x2" in out and "4x2" in out


def test_reference_table():
    out = _bench("--reference")
    assert "mlp 'gelu-exact' on both sides, Prism fused_adamw 'always'" in out
    assert "| nanogpt | cpu |" in out and "| nanogpt-fused | wall |" in out
