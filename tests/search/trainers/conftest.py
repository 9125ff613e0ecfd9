import time
from pathlib import Path

import pytest

from search.config import load_config, parse_config
from search.runner.worker import TrialSpec

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "own_trainer"


@pytest.fixture
def example_config(tmp_path):
    """examples/own_trainer/study.toml with the given [trainer] fields changed, its folders in tmp_path."""

    def make(**trainer):
        config = load_config(EXAMPLE / "study.toml")
        data = config.model_dump() | {"storage": f"sqlite:///{tmp_path / 'study.db'}", "checkpoint_dir": str(tmp_path / "checkpoints")}
        data["trainer"] = data["trainer"] | trainer
        return parse_config(data, "test")

    return make


def spec_for(config, schedule: str, number: int = 0, baseline: bool = True) -> TrialSpec:
    """The spec the driver sends a worker for `schedule`; `baseline`: with the neutrality probe."""
    return TrialSpec.of(
        config,
        schedule,
        fingerprint="",
        number=number,
        seed=config.seed,
        device="cpu",
        checkpoint_dir=None,
        keep_checkpoints="none",
        probe=baseline,
    )


def alive(pid: int) -> bool:
    """True while `pid` is a process that has not exited (a zombie has exited)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def gone_within(pid: int, seconds: float = 10) -> bool:
    """Whether `pid` exits within `seconds`: a process killed with its group, or orphaned, dies moments later."""
    deadline = time.monotonic() + seconds
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not alive(pid)
