"""The package boundaries the project promises."""

import subprocess
import sys

import pytest


def _run(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()


def test_prism_works_without_optuna_and_ray():
    """The library is usable where only its own dependencies are installed: block the service's, build a model."""
    code = (
        "import sys\n"
        "for name in ('optuna', 'ray'):\n"
        "    sys.modules[name] = None  # an import of either now raises ImportError\n"
        "import torch, prism, prism.analysis\n"
        "cfg = prism.ModelConfig(vocab_size=32, n_layer=2, d_model=64, block_size=8, dh_min=16)\n"
        "model = prism.PrismLM(cfg, prism.Schedule.parse('2x2'))\n"
        "print(tuple(model(torch.zeros(1, 8, dtype=torch.long))[0].shape))\n"
    )
    assert _run(code) == "(1, 8, 32)"


@pytest.mark.parametrize("module", ["search", "search.config", "search.storage", "search.dashboard", "prism.config"])
def test_light_faces_load_neither_ray_nor_torch(module):
    """`prism-search --help`, `status` and the dashboard start fast: only the runner pays for Ray and torch."""
    code = f"import sys, {module}; print(sorted(m for m in ('ray', 'torch') if m in sys.modules))"
    assert _run(code) == "[]"


def test_public_api_is_reexported():
    import prism
    import search

    for module in (prism, search):
        assert module.__all__ and all(hasattr(module, name) for name in module.__all__)


def test_prism_train_stays_the_function_after_its_module_is_imported():
    """A lazily exported name must not be replaced by the submodule of the same name once that is imported."""
    code = "import prism.train; from prism import train; print(callable(train) and not isinstance(train, type(prism)))"
    assert _run(code) == "True"
