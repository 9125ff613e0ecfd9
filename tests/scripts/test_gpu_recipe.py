"""scripts/gpu_recipe.py: the peak it divides by comes from the GPU's name, and `--measure` needs no service."""

import subprocess
import sys

import pytest

from tests.search.conftest import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
from gpu_recipe import peak_tflops


@pytest.mark.parametrize(
    "name, tflops",
    [
        ("NVIDIA H100 80GB HBM3", 989.0),  # SXM
        ("NVIDIA H100 PCIe", 756.0),
        ("NVIDIA H100 NVL", 835.0),
        ("NVIDIA H200", 989.0),
        ("NVIDIA GH200 480GB", 989.0),
        ("NVIDIA A100-SXM4-80GB", 312.0),
        ("NVIDIA A100 80GB PCIe", 312.0),
        ("NVIDIA L4", 121.0),
        ("NVIDIA L40S", 362.0),
        ("Tesla T4", 65.0),
        ("NVIDIA GeForce RTX 4090", None),  # unknown: the script asks for --peak-tflops
    ],
)
def test_peak_from_the_device_name(name, tflops):
    assert peak_tflops(name) == tflops


def test_measure_runs_without_the_service():
    """On the CPU here (`--device cpu`), in a process whose imports are listed afterwards: no search, Optuna or Ray."""
    code = (
        "import runpy, sys; sys.argv = ['gpu_recipe.py', 'studies/tiny.toml', '--measure', '--device', 'cpu', '--steps', '1', "
        "'--warmup', '1', '--peak-tflops', '1', '--schedules', '4x3']; runpy.run_path('scripts/gpu_recipe.py', run_name='__main__'); "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'search', 'optuna', 'ray'}))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT, env={"PYTHONPATH": str(ROOT)}
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "measured on cpu" in result.stdout and result.stdout.rstrip().endswith("[]")
    assert "peak: 1 TFLOPS (given --peak-tflops)" in result.stdout
