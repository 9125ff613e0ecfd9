"""The package boundaries the project promises."""

import ast
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


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


@pytest.mark.parametrize("module", ["search", "search.config", "search.storage", "search.dashboard", "search.cli", "prism.config"])
def test_light_faces_load_neither_ray_nor_torch(module):
    """`prism-search --help`, `status` and the dashboard start fast: only the runner pays for Ray and torch."""
    code = f"import sys, {module}; print(sorted(m for m in ('ray', 'torch') if m in sys.modules))"
    assert _run(code) == "[]"


def test_public_api_is_reexported():
    import prism
    import search

    for module in (prism, search):
        assert module.__all__ and all(hasattr(module, name) for name in module.__all__)


@pytest.mark.parametrize("package", ["prism", "search"])
def test_lazy_exports_match_what_type_checkers_read(package):
    """The TYPE_CHECKING imports of a lazy package face and its run-time table name the same things, from the same modules."""
    import importlib

    tree = ast.parse((ROOT / package / "__init__.py").read_text())
    guarded = next(n for n in tree.body if isinstance(n, ast.If) and getattr(n.test, "id", None) == "TYPE_CHECKING")
    static = {(alias.name, node.module) for node in guarded.body for alias in node.names}
    assert static == set(importlib.import_module(package)._HOME.items())


@pytest.mark.parametrize("package", ["prism", "search", "search.study", "search.analysis", "search.storage"])
def test_no_exported_name_hides_a_submodule(package):
    """A function bound over a submodule of the same name (`search.study.confirm`) makes `import pkg.name` and
    `pkg.name` disagree; every submodule's name must differ from every name the package exports."""
    import importlib
    import pkgutil

    module = importlib.import_module(package)
    submodules = {info.name for info in pkgutil.iter_modules(module.__path__)}
    assert not submodules & set(module.__all__), f"{package} exports names that hide its submodules"


# The arrows: CLI -> study -> {space, runner, storage, priors}; runner -> {prism, analysis}; dashboard -> analysis -> storage.
# Each entry lists what a package must never import.
_SERVICE = ("search.analysis", "search.cli", "search.dashboard", "search.priors", "search.runner", "search.storage", "search.study")
FORBIDDEN = {
    "prism": ("search", "optuna", "ray"),  # the library knows nothing of the service
    "search.errors": ("search", "prism"),
    "search.attrs": ("search", "prism", "optuna", "ray", "torch"),  # the stored names: read by storage and trackers alike
    "search.urls": ("search", "prism", "optuna", "ray", "torch"),  # URL masking: storage, trackers and displays alike
    "search.families": (*_SERVICE, "search.config"),  # the schedule space: prism only
    "search.references": (*_SERVICE, "search.config"),
    "search.config": _SERVICE,
    "search.analysis.stats": (*_SERVICE, "search.config"),  # statistics on numbers: nothing of studies
    "search.progress": _SERVICE,  # a display the driver reports into
    "search.tracking": _SERVICE,
    "search.storage": (
        "search.analysis",
        "search.cli",
        "search.dashboard",
        "search.priors",
        "search.runner",
        "search.study",
        "ray",
        "torch",
    ),
    # what a study's stored trials show (summaries, statistics, the budget count): reads storage, never writes or trains
    "search.analysis": (
        "search.cli",
        "search.dashboard",
        "search.priors",
        "search.runner",
        "search.study",
        "search.progress",
        "search.tracking",
        "ray",
        "torch",
    ),
    # the runner trains what it is handed: prism, plus storage, config, tracking and the progress display
    "search.runner": ("search.cli", "search.dashboard", "search.priors", "search.study", "search.families", "search.analysis.stats"),
    "search.priors": ("search.cli", "search.dashboard", "search.runner", "search.study"),
    # the dashboard reads analysis and storage (plus config), never what writes or trains
    "search.dashboard": (
        "search.cli",
        "search.priors",
        "search.runner",
        "search.study",
        "search.families",
        "search.progress",
        "search.tracking",
        "ray",
        "torch",
    ),
    "search.study": ("search.cli", "search.dashboard"),
    # the CLI parses, calls the study (search.study.commands for single models and priors) and renders
    "search.cli": (
        "search.runner",
        "search.priors",
        "search.families",
        "search.references",
        "search.tracking",
        "search.progress",
        "ray",
        "torch",
    ),
}


def _exists(name: str) -> bool:
    if not name.startswith(("prism", "search")):
        return True  # a third-party package
    path = ROOT / name.replace(".", "/")
    return path.is_dir() or path.with_suffix(".py").is_file()


def _imports(path: pathlib.Path) -> set[str]:
    """Every module a file imports: at the top, inside functions and under TYPE_CHECKING alike."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
    return found


def _inside(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_import_arrows_point_one_way():
    broken = []
    for path in sorted([*ROOT.glob("prism/**/*.py"), *ROOT.glob("search/**/*.py")]):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        owner = max((p for p in FORBIDDEN if _inside(module, p)), key=len, default=None)
        if owner is None or not _exists(owner):
            continue
        for imported in _imports(path):
            banned = [b for b in FORBIDDEN[owner] if _inside(imported, b) and _exists(b) and not _inside(imported, owner)]
            broken += [f"{module} imports {imported}: {owner} must not import {b}" for b in banned]
    assert not broken, "\n".join(sorted(set(broken)))


_ATTR_RECEIVERS = ("user_attrs", "attrs")  # a trial's or study's user attrs, or the local name they are read into


def _receiver(node: ast.expr) -> str | None:
    return node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else None


def _spelled_names(tree: ast.AST, names: set[str]) -> list[tuple[int, str]]:
    """String literals that spell a stored name where an attr is read, tested, written or queued, or a role compared."""
    hits = []

    def check(node: ast.AST | None) -> None:
        if isinstance(node, ast.Constant) and node.value in names:
            hits.append((node.lineno, node.value))

    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr == "get" and _receiver(node.func.value) in _ATTR_RECEIVERS:
                for arg in node.args:
                    check(arg)
            if node.func.attr in ("set_user_attr", "set_trial_user_attr") or any(_receiver(a) == "set_user_attr" for a in node.args):
                for arg in node.args:
                    check(arg)
        if isinstance(node, ast.Call):
            for kw in node.keywords:
                if kw.arg == "role":
                    check(kw.value)
                if kw.arg == "user_attrs" and isinstance(kw.value, ast.Dict):
                    for key in kw.value.keys:
                        check(key)
        if isinstance(node, ast.Subscript) and _receiver(node.value) in _ATTR_RECEIVERS:
            check(node.slice)
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_receiver(s) in (*_ATTR_RECEIVERS, "role") for s in sides):
                for side in sides:
                    check(side)
    return hits


def test_stored_names_are_spelled_once():
    """A key or role spelled twice can drift apart unnoticed (a reader asking for `"seeds"` finds nothing): every
    module reads the names from search/attrs.py."""
    import search.attrs

    names = {v for k, v in vars(search.attrs).items() if k.isupper() and isinstance(v, str)}
    assert {"schedule", "role", "seed", "reference", "baseline", "search", "confirm"} <= names
    spelled = []
    for path in sorted(ROOT.glob("search/**/*.py")):
        if path.name != "attrs.py":
            spelled += [
                f"{path.relative_to(ROOT)}:{line} spells {name!r}" for line, name in _spelled_names(ast.parse(path.read_text()), names)
            ]
    assert not spelled, "\n".join(spelled)


def test_the_scan_finds_spelled_names():
    """The scan above must be able to fail: each way of spelling a name is caught."""
    code = (
        "t.user_attrs.get('seed')\nattrs['schedule']\n'role' in t.user_attrs\nenqueue(s, role='baseline')\n"
        "trial.set_user_attr('error', 1)\nself._db(trial.set_user_attr, 'worker', 1)\nr.role != 'confirm'\n"
        "s.enqueue_trial({}, user_attrs={'reference': 1})\nx.get('seed')\n"
    )
    assert sorted(_spelled_names(ast.parse(code), {"seed", "schedule", "role", "baseline", "error", "worker", "confirm", "reference"})) == [
        (1, "seed"),
        (2, "schedule"),
        (3, "role"),
        (4, "baseline"),
        (5, "error"),
        (6, "worker"),
        (7, "confirm"),
        (8, "reference"),
    ]
