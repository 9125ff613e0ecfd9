"""The package boundaries the project promises."""

import subprocess
import sys


def test_prism_imports_neither_optuna_nor_ray():
    code = "import sys, prism, prism.analysis; print(sorted(m for m in ('optuna', 'ray') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_public_api_is_reexported():
    import prism
    import search

    for module in (prism, search):
        assert module.__all__ and all(hasattr(module, name) for name in module.__all__)
