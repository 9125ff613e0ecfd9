import contextlib
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from search.config import StudyConfig, load_config

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def ray_local():
    """A real local Ray cluster for the whole session (started once: ~3 s)."""
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


@pytest.fixture
def tiny_config(tmp_path) -> StudyConfig:
    """The seconds-long study from studies/tiny.toml, stored in a fresh SQLite file, its checkpoints beside it."""
    config = load_config(ROOT / "studies" / "tiny.toml")
    return config.model_copy(update={"storage": f"sqlite:///{tmp_path / 'study.db'}", "checkpoint_dir": str(tmp_path / "checkpoints")})


@pytest.fixture
def study_toml(tmp_path):
    """Write a variant of studies/tiny.toml with `replace` pairs applied; returns its path."""

    def make(*replace: tuple[str, str], name: str = "study.toml") -> Path:
        text = (ROOT / "studies" / "tiny.toml").read_text()
        for old, new in replace:
            assert old in text, old
            text = text.replace(old, new)
        path = tmp_path / name
        path.write_text(text)
        return path

    return make


@pytest.fixture
def pg_url():
    """A fresh PostgreSQL database on this machine for one test, dropped afterwards (connections included)."""
    from tests.search.pg import fresh_database

    with fresh_database() as url:
        yield url


@contextlib.contextmanager
def small_file_system(folder: Path, size: str) -> Iterator[Path]:
    """A real tmpfs of `size` mounted at the new folder `folder`, unmounted afterwards. Mounting needs root;
    elsewhere the test is skipped."""
    folder.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"a small file system needs a tmpfs mount, which needs root ({mounted.stderr.strip()})")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "--lazy", str(folder)], check=True)


def make_read_only(folder: Path) -> None:
    """Remount a small_file_system read-only: nothing in it can be written or created, by root neither."""
    subprocess.run(["mount", "-o", "remount,ro", str(folder)], check=True)


@pytest.fixture
def full_disk(tmp_path) -> Iterator[Path]:
    """A folder on a real file system with no space left: a small tmpfs filled to its last byte."""
    with small_file_system(tmp_path / "full", "64k") as folder:
        with open(folder / "filler", "wb", buffering=0) as filler, contextlib.suppress(OSError):
            while filler.write(bytes(4096)):  # until ENOSPC
                pass
        assert shutil.disk_usage(folder).free == 0
        yield folder
