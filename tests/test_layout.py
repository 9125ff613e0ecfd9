"""The package boundaries the project promises."""

import ast
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
ADAPTER = "search/storage/_optuna.py"  # the one module that knows Optuna's internals


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


LIGHT = ["search", "search.config", "search.storage", "search.dashboard", "search.analysis", "search.study", "search.cli", "prism.config"]


@pytest.mark.parametrize("module", LIGHT)
def test_light_faces_load_neither_ray_nor_torch(module):
    """`prism-search --help`, `status` and the dashboard start fast: only the runner pays for Ray and torch."""
    code = f"import sys, {module}; print(sorted(m for m in ('ray', 'torch') if m in sys.modules))"
    assert _run(code) == "[]"


def test_a_cpu_studys_driver_loads_ray_and_never_torch(tmp_path):
    """The driver of `run`, `resume` and `confirm` only reads what its workers send: torch (about 1.4 s of CPU to
    import) loads in the workers alone, also through the checks made before a CPU study starts."""
    code = (
        "import sys\n"
        "import search.runner.driver, search.study._lifecycle\n"
        "from search.config import load_config\n"
        "from search.runner.preflight import preflight\n"
        f"config = load_config({str(ROOT / 'studies' / 'tiny.toml')!r})\n"
        f"preflight(config.model_copy(update={{'storage': 'sqlite:///{tmp_path / 'study.db'}'}}))\n"
        "print(sorted(m for m in ('ray', 'torch') if m in sys.modules))"
    )
    assert _run(code) == "['ray']"


@pytest.mark.xdist_group("layout")
def test_a_grouped_test_runs_in_its_group(request):
    """`--dist loadgroup` (README command 2) keeps a group's tests on one worker, so a module's Ray cluster or browser
    starts once, by adding the group to each test's id; pytest 9.2 made that a silent no-op for pytest-xdist 3.8."""
    if not getattr(request.config.option, "loadgroup", False):
        pytest.skip("runs only on pytest workers under --dist loadgroup")
    assert request.node.nodeid.endswith("@layout"), request.node.nodeid


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


# The layers of the service, lowest first. A package imports only from layers below its own (and prism, and third
# parties); packages of one layer do not import each other. Deferred imports (inside functions) and TYPE_CHECKING
# imports count: they hide an arrow from Python, not from a reader.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("search.errors", "search.attrs", "search.signals"),  # nothing of the project: names, errors, Ctrl-C
    ("search.outputs", "search.families", "search.trainers"),  # files and JSON; the schedule space; [trainer] sections
    ("search.config",),  # the study's config, validated
    ("search.storage", "search.tracking"),  # where trials are kept; where finished trials are logged
    ("search.analysis",),  # what stored trials show: reads storage, never writes or trains
    ("search.text", "search.runner"),  # the words of every display; the training of trials on Ray
    ("search.priors",),  # geometry of a trained model mapped to schedules
    ("search.study",),  # one study's life: the way in from Python
    ("search.dashboard",),  # reads analysis, storage and the study's face
    ("search.cli",),  # parses, calls the study, renders
)
FACE = "search"  # the package face re-exports from every layer


def _module_of(path: pathlib.Path, root: pathlib.Path = ROOT) -> str:
    return ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")


def _layer_of(module: str) -> int | None:
    return next((i for i, layer in enumerate(LAYERS) for package in layer if _inside(module, package)), None)


def test_every_package_of_search_has_a_layer():
    packages = {_module_of(p) for p in (ROOT / "search").iterdir() if p.suffix == ".py" or (p / "__init__.py").is_file()}
    named = {package for layer in LAYERS for package in layer}
    assert packages - {FACE} == named, f"not in LAYERS: {sorted(packages - named - {FACE})}; gone: {sorted(named - packages)}"


def _layer_breaks(graph: dict[str, set[str]]) -> list[str]:
    broken = []
    for module, imported in graph.items():
        mine = _layer_of(module)
        for other in imported:
            theirs = _layer_of(other)
            if mine is not None and theirs is not None and theirs >= mine and not _inside(other, _package_of(module)):
                broken.append(f"{module} imports {other}: layer {mine} ({_package_of(module)}) may import only layers below it")
    return sorted(broken)


def _package_of(module: str) -> str:
    return next(package for layer in LAYERS for package in layer if _inside(module, package))


def test_each_layer_imports_only_layers_below_it():
    assert not (broken := _layer_breaks(_module_graph(ROOT))), "\n".join(broken)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        top = stack.pop()
                        on_stack.discard(top)
                        component.append(top)
                        if top == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph.get(child, ())))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return found


def test_no_module_imports_itself_around_a_circle():
    """Every import counts, a deferred one too: a circle of modules is one idea split over files, or a layer missing."""
    assert not (cycles := _cycles(_module_graph(ROOT))), "\n".join(" -> ".join(c) for c in cycles)


def test_the_checks_find_a_circle_and_an_upward_arrow():
    """The scans above must be able to fail: a config that imports the runner (which imports the config) is both."""
    graph = {"search.config": {"search.runner.worker"}, "search.runner.worker": {"search.config"}}
    assert _cycles(graph) == [["search.config", "search.runner.worker"]]
    assert _layer_breaks(graph) == ["search.config imports search.runner.worker: layer 2 (search.config) may import only layers below it"]


# Narrower promises than the layers make: what a module may not import although its layer would allow it.
_SERVICE = ("search.analysis", "search.cli", "search.dashboard", "search.priors", "search.runner", "search.storage", "search.study")
FORBIDDEN = {
    "prism": ("search", "optuna", "ray"),  # the library knows nothing of the service
    "search.attrs": ("optuna", "ray", "torch"),  # the stored names: read by storage and trackers alike
    "search.outputs": ("prism", "optuna", "ray", "torch"),
    "search.outputs.urls": ("search", "prism", "optuna", "ray", "torch"),
    "search.outputs.jsonout": ("search", "prism", "optuna", "ray", "torch"),
    "search.signals": ("prism", "optuna", "ray", "torch"),  # SIGTERM as Ctrl-C: nothing of the project
    "search.trainers": ("optuna", "ray", "torch"),  # sections and the line protocol: a config loads without them
    "search.analysis.stats": ("search.storage", "search.config", "optuna"),  # statistics on numbers: nothing of studies
    "search.cli.progress": _SERVICE,  # the CLI's live display of a run
    "search.storage": ("ray", "torch"),
    "search.analysis": ("ray", "torch"),
    "search.runner": ("search.analysis.stats",),  # the runner trains what it is handed; it decides nothing
    # the dashboard reads analysis and storage (plus config) and where a study's policies stand (search.study's
    # face: test_the_dashboard_reads_the_study_only_through_its_face), never what writes or trains
    "search.dashboard": ("search.runner", "search.families", "search.tracking", "ray", "torch"),
    "search.text": ("search.storage", "search.tracking", "ray", "torch"),  # reads what analysis returns, writes English
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


def _module_graph(root: pathlib.Path) -> dict[str, set[str]]:
    """Each module of prism/ and search/ -> the modules of them it imports (`from pkg import submodule` is the
    submodule; `from pkg import name` is the package's face)."""
    paths = [*root.glob("prism/**/*.py"), *root.glob("search/**/*.py")]
    modules = {_module_of(p, root) for p in paths}

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for path in paths:
        module = _module_of(path, root)
        targets = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets |= {resolve(alias.name) for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                targets |= {resolve(f"{node.module}.{alias.name}") for alias in node.names}
        graph[module] = {t for t in targets if t is not None and t != module}
    return graph


def _inside(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_narrower_arrows_hold():
    broken = []
    for path in sorted([*ROOT.glob("prism/**/*.py"), *ROOT.glob("search/**/*.py")]):
        module = _module_of(path)
        owner = max((p for p in FORBIDDEN if _inside(module, p)), key=len, default=None)
        if owner is None or not _exists(owner):
            continue
        for imported in _imports(path):
            banned = [b for b in FORBIDDEN[owner] if _inside(imported, b) and _exists(b) and not _inside(imported, owner)]
            broken += [f"{module} imports {imported}: {owner} must not import {b}" for b in banned]
    assert not broken, "\n".join(sorted(set(broken)))


# The CLI parses, calls and renders: it reaches each part through that part's package face (the names in its
# __all__; a plain module's public names), imported inside the commands. Whatever trains or writes a study goes
# through search.study; reading one through search.analysis.
CLI_FACES = (
    "prism",
    "search.analysis",
    "search.attrs",
    "search.config",
    "search.dashboard",
    "search.errors",
    "search.outputs",
    "search.outputs.jsonout",  # the one JSON writer (null for inf/nan); it imports nothing of the project
    "search.outputs.urls",
    "search.priors",
    "search.cli.progress",
    "search.signals",
    "search.study",
    "search.text",
)
CLI_THIRD_PARTY = ("typer", "rich")  # and the standard library


def _public(module: str) -> set[str]:
    import importlib

    face = importlib.import_module(module)
    return set(getattr(face, "__all__", None) or (name for name in vars(face) if not name.startswith("_")))


def _past_the_faces(tree: ast.AST) -> list[str]:
    """Every import in `tree` the CLI may not make."""
    wrong = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported = [(alias.name, None) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            imported = [(node.module, alias.name) for alias in node.names]
        else:
            continue
        for module, name in imported:
            top = module.split(".")[0]
            if top in ("prism", "search"):
                if module not in CLI_FACES:
                    wrong.append(f"{node.lineno}: {module} is not a part's face ({', '.join(CLI_FACES)})")
                elif name is None or name not in _public(module):
                    wrong.append(f"{node.lineno}: {module}.{name} is not a public name of its face")
            elif top not in CLI_THIRD_PARTY and top not in sys.stdlib_module_names:
                wrong.append(f"{node.lineno}: {module}: the CLI reaches it only through a part")
    return wrong


def test_the_cli_reaches_each_part_through_its_face():
    """No deep or private module, no storage, runner, Optuna or SQLAlchemy: the CLI's imports say what it may touch."""
    wrong = _past_the_faces(ast.parse((ROOT / "search" / "cli" / "__init__.py").read_text()))
    assert not wrong, "\n".join(wrong)


def test_errors_are_imported_from_search_errors_only():
    """One home for the errors: a module that re-exports them (a config importing ConfigError) is no second door."""
    import search.errors

    errors = {name for name, value in vars(search.errors).items() if isinstance(value, type) and issubclass(value, Exception)}
    wrong = []
    for path in sorted([*ROOT.glob("search/**/*.py"), *ROOT.glob("tests/**/*.py"), *ROOT.glob("scripts/*.py")]):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("search") and node.module != "search.errors":
                wrong += [
                    f"{path.relative_to(ROOT)}:{node.lineno} {alias.name} from {node.module}"
                    for alias in node.names
                    if alias.name in errors
                ]
    assert not wrong, "\n".join(wrong)


def test_the_dashboard_reads_the_study_only_through_its_face():
    """search.study's face (its __all__), never one of its modules: the modules that train and write sit behind it."""
    face = _public("search.study")
    wrong = sorted(
        f"{path.relative_to(ROOT)} imports {imported}"
        for path in (ROOT / "search" / "dashboard").rglob("*.py")
        for imported in _imports(path)
        if _inside(imported, "search.study") and imported != "search.study" and imported.removeprefix("search.study.") not in face
    )
    assert not wrong, "\n".join(wrong)


def test_the_study_s_face_lists_nouns():
    """A verb of the study is a method of one of its nouns (`Study.confirm`, `SingleRun.train`), not a free function
    beside them: the face is the classes and constants a caller holds."""
    import inspect

    import search.study

    verbs = [name for name in search.study.__all__ if inspect.isfunction(getattr(search.study, name))]
    assert not verbs, f"search.study exports functions: {verbs}"


def test_the_face_scan_finds_a_reach_past_a_face():
    code = (
        "from search.study import Study\nimport json\nfrom rich.table import Table\n"  # faces, the standard library, rich
        "from search.study._lifecycle import drive\nfrom search.storage import open_storage\nimport optuna\n"
        "from prism.analysis import format_profile\nfrom search.study import _drive\nimport search.study\n"
    )
    assert [line.split(":")[0] for line in _past_the_faces(ast.parse(code))] == ["4", "5", "6", "7", "8", "9"]


# a trial's or study's attrs, the local name they are read into, or a result's extras (stored as its trial's attrs)
_ATTR_RECEIVERS = ("user_attrs", "system_attrs", "attrs", "extra")
_SETTERS = {"set_user_attr": 0, "set_system_attr": 0}  # where the key sits among a setter's arguments
_SETTERS |= dict.fromkeys(("set_trial_user_attr", "set_trial_system_attr", "set_study_user_attr", "set_study_system_attr"), 1)
_ENQUEUE_PARAMS = {"role", "seed"}  # search.storage.records.enqueue: every other keyword is stored as an attr


def _receiver(node: ast.expr) -> str | None:
    return node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else None


def _spelled_names(tree: ast.AST, names: set[str]) -> list[tuple[int, str]]:
    """Stored names spelled outside search/attrs.py: any string literal used as an attr key (written, read,
    tested, queued, or put into a result's extras, which become attrs), directly or through a constant of the
    module, and a registered name compared as a role."""
    hits = []
    constants = {  # NAME = "text" anywhere in the module: a key spelled once, but not in the registry
        node.targets[0].id: node.value.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign)
        and isinstance(node.targets[0], ast.Name)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    }

    def key(node: ast.AST | None) -> None:
        """The text a key is spelled with: a string, an f-string's or a concatenation's literal parts, a constant."""
        for n in ast.walk(node) if node else ():
            if isinstance(n, ast.Constant) and isinstance(n.value, str):
                hits.append((n.lineno, n.value))
            elif isinstance(n, ast.Name) and n.id in constants:
                hits.append((n.lineno, constants[n.id]))

    def dict_keys(node: ast.expr) -> None:
        for k in node.keys if isinstance(node, ast.Dict) else ():
            key(k)

    def name(node: ast.AST | None) -> None:
        if isinstance(node, ast.Constant) and node.value in names:
            hits.append((node.lineno, node.value))

    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            args = node.args
            setter = _receiver(node.func)
            if setter in _SETTERS and len(args) > _SETTERS[setter]:
                key(args[_SETTERS[setter]])
            for i, arg in enumerate(args):  # a setter handed to a wrapper: self._db(trial.set_user_attr, KEY, value)
                if _receiver(arg) in _SETTERS and len(args) > i + 1 + _SETTERS[_receiver(arg)]:
                    key(args[i + 1 + _SETTERS[_receiver(arg)]])
            if isinstance(node.func, ast.Attribute) and _receiver(node.func.value) in _ATTR_RECEIVERS:
                if node.func.attr in ("get", "pop", "setdefault") and args:
                    key(args[0])
                if node.func.attr == "update" and args:
                    dict_keys(args[0])
            for kw in node.keywords:
                if kw.arg == "role":
                    name(kw.value)
                if kw.arg in ("user_attrs", "system_attrs"):
                    dict_keys(kw.value)
                if setter == "enqueue":
                    if kw.arg is None:
                        dict_keys(kw.value)
                    elif kw.arg not in _ENQUEUE_PARAMS:
                        hits.append((kw.value.lineno, kw.arg))
        if isinstance(node, ast.Subscript) and _receiver(node.value) in _ATTR_RECEIVERS:
            key(node.slice)
        if isinstance(node, ast.AugAssign) and _receiver(node.target) in _ATTR_RECEIVERS:
            dict_keys(node.value)
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if isinstance(node.ops[0], (ast.In, ast.NotIn)) and _receiver(node.comparators[0]) in _ATTR_RECEIVERS:
                key(node.left)
            elif any(_receiver(s) in (*_ATTR_RECEIVERS, "role") for s in sides):
                for side in sides:
                    name(side)
    return hits


def test_stored_names_are_spelled_once():
    """A key or role spelled twice can drift apart unnoticed (a reader asking for `"seeds"` finds nothing): every
    module reads the names from search/attrs.py."""
    import search.attrs

    names = {v for k, v in vars(search.attrs).items() if k.isupper() and isinstance(v, str)}
    assert {"schedule", "role", "seed", "reference", "baseline", "search", "confirm"} <= names
    spelled = []
    for path in sorted(ROOT.glob("search/**/*.py")):
        if path.name != "attrs.py" and str(path.relative_to(ROOT)) != ADAPTER:  # the adapter spells Optuna's keys
            spelled += [
                f"{path.relative_to(ROOT)}:{line} spells {name!r}" for line, name in _spelled_names(ast.parse(path.read_text()), names)
            ]
    assert not spelled, "\n".join(spelled)


def test_the_scan_finds_spelled_names():
    """The scan above must be able to fail: each way of spelling a key, registered or not, or a role is caught,
    and a value or a message is not."""
    code = (
        "t.user_attrs.get('seed')\nattrs['schedule']\n'role' in t.user_attrs\nenqueue(s, role='baseline')\n"
        "trial.set_user_attr('error', 1)\nself._db(trial.set_user_attr, 'worker', 1)\nr.role != 'confirm'\n"
        "s.enqueue_trial({}, user_attrs={'reference': 1})\nx.get('seed')\n"
        "storage.set_trial_system_attr(tid, 'prism.grid_index', 3)\n"
        "trial.set_user_attr(f'rung_{k}', v)\n"
        "study.user_attrs[PLAN + '.plan']\n"
        "GRID = 'grid'\nt.system_attrs.get(GRID)\n"
        "enqueue(s, f, x, role=r, seed=1, retry_of=2)\n"
        "result.extra |= {'throughput_ratio': 1}\n"
        "result.extra.pop('checkpoint', None)\n"
        "'fixed' not in t.system_attrs\n"
        "self._db(storage.set_trial_user_attr, tid, 'attempt', 1)\n"
        "trial.set_user_attr(ERROR, 'a message'); study.set_metric_names(['val_loss']); t.user_attrs.get(SEED, 'none')\n"
        "enqueue(s, f, x, role=r, seed=1, **{'source': 'prior'})\n"
    )
    registered = {"seed", "schedule", "role", "baseline", "error", "worker", "confirm", "reference"}
    assert sorted(_spelled_names(ast.parse(code), registered)) == [
        (1, "seed"),
        (2, "schedule"),
        (3, "role"),
        (4, "baseline"),
        (5, "error"),
        (6, "worker"),
        (7, "confirm"),
        (8, "reference"),
        (10, "prism.grid_index"),
        (11, "rung_"),
        (12, ".plan"),
        (14, "grid"),
        (15, "retry_of"),
        (16, "throughput_ratio"),
        (17, "checkpoint"),
        (18, "fixed"),
        (19, "attempt"),
        (21, "source"),
    ]


# Optuna's own system-attr keys, read from optuna 5.0's source: exact keys (study.py "fixed_params", trial/_trial.py
# and study/_constrained_optimization.py "constraints", samplers/_grid.py, samplers/_cmaes.py, storages/_callbacks.py;
# "heartbeat": no key, but its heartbeat tables' name) and the prefixes of keys built at run time (samplers' "tpe:",
# "gp:", "cma:", ...; GA samplers' "<class>:generation"; study.py "study:metric_names"; artifacts; the terminator;
# "nsga2:", older Optuna's NSGA-II keys, still in studies it wrote).
OPTUNA_KEYS = {"fixed_params", "constraints", "grid_id", "search_space", "failed_trial", "retry_history", "x_for_tell", "heartbeat"}
OPTUNA_KEY_PREFIXES = (
    "constraints:",
    "tpe:",
    "gp:",
    "cma:",
    "sepcma:",
    "cmawm:",
    "nsga2:",
    "BaseGASampler:",
    "NSGAIISampler:",
    "NSGAIIISampler:",
    "study:",
    "artifacts:",
    "terminator:",
)
# attributes of Optuna objects that hold its internals (a study's storage and id, a trial's id, the RDB backend)
OPTUNA_PRIVATE_ATTRS = {"_storage", "_trial_id", "_study_id", "_backend", "_cached_frozen_trial"}


def _optuna_private(tree: ast.AST, in_storage: bool = False) -> list[tuple[int, str]]:
    """What only the adapter may know of Optuna: its private modules and attributes and its system-attr keys.
    `in_storage`: the file is in search/storage/, whose public face re-exports the adapter and may import it."""
    hits = []

    def private_module(name: str) -> bool:
        parts = name.split(".")
        optunas = parts[0] == "optuna" and any(p.startswith("_") and not p.startswith("__") for p in parts[1:])
        return optunas or (not in_storage and name.startswith("search.storage._optuna"))

    def dotted(node: ast.expr) -> str:
        chain = []
        while isinstance(node, ast.Attribute):
            chain.append(node.attr)
            node = node.value
        return ".".join([getattr(node, "id", "?"), *reversed(chain)])

    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):  # a storage subclass overrides what Optuna's storages do inside
            hits += [(node.lineno, dotted(b)) for b in node.bases if dotted(b).startswith(("optuna.storages.", "storages."))]
        if isinstance(node, ast.Import):
            hits += [(node.lineno, a.name) for a in node.names if private_module(a.name)]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            hits += [(node.lineno, n) for n in names if private_module(n)][:1]
        elif isinstance(node, ast.Attribute):
            name = dotted(node)
            if private_module(name) or (node.attr in OPTUNA_PRIVATE_ATTRS and getattr(node.value, "id", None) != "self"):
                hits.append((node.lineno, name))
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and not any(c.isspace() for c in node.value)  # a key has no spaces, prose has
            and (node.value in OPTUNA_KEYS or node.value.startswith(OPTUNA_KEY_PREFIXES))
        ):
            hits.append((node.lineno, node.value))
    return hits


def test_optuna_internals_stay_in_the_adapter():
    """An Optuna upgrade is checked in one file: only search/storage/_optuna.py imports Optuna's private modules,
    touches its objects' private attributes, subclasses its storages or spells its system-attr keys; the rest asks
    search.storage."""
    assert (ROOT / ADAPTER).is_file()
    found = []
    for path in sorted([*ROOT.glob("prism/**/*.py"), *ROOT.glob("search/**/*.py"), *ROOT.glob("scripts/**/*.py")]):
        relative = str(path.relative_to(ROOT))
        if relative != ADAPTER:
            in_storage = relative.startswith("search/storage/")
            found += [f"{relative}:{line} uses {name!r}" for line, name in _optuna_private(ast.parse(path.read_text()), in_storage)]
    assert not found, "\n".join(found)


def test_the_scan_finds_optuna_internals():
    """The scan above must be able to fail: each kind of private knowledge is caught, and the public face is not."""
    code = (
        "from optuna.storages._rdb import models\n"
        "import optuna._imports\n"
        "from search.storage._optuna import trial_id\n"
        "from search.storage import _optuna\n"
        "s = optuna.storages._CachedStorage(x)\n"
        "study._storage.get_trial(trial._trial_id)\n"
        "'fixed_params' in t.system_attrs\n"
        "k.startswith('constraints')\n"
        "t.system_attrs.get('NSGAIISampler:generation')\n"
        "f'nsga2:parent:{i}'\n"
        "from search.storage import storage_of, trial_id\n"
        "optuna.storages.InMemoryStorage(); self._storage = None; optuna.__version__; 'study: its name'\n"
        "class Ready(optuna.storages.InMemoryStorage): pass\n"
    )
    assert sorted(_optuna_private(ast.parse(code))) == [
        (1, "optuna.storages._rdb"),
        (2, "optuna._imports"),
        (3, "search.storage._optuna"),
        (4, "search.storage._optuna"),
        (5, "optuna.storages._CachedStorage"),
        (6, "study._storage"),
        (6, "trial._trial_id"),
        (7, "fixed_params"),
        (8, "constraints"),
        (9, "NSGAIISampler:generation"),
        (10, "nsga2:parent:"),
        (13, "optuna.storages.InMemoryStorage"),
    ]
    assert _optuna_private(ast.parse("from search.storage._optuna import trial_id\n"), in_storage=True) == []


_WRITES = {"set_user_attr", "set_system_attr", "set_constraint", "tell", "enqueue", "enqueue_trial", "add_trial", "create_study"}


def test_analysis_only_reads():
    """search.analysis reads stored studies and returns typed values: no call in it writes a study or a trial."""
    calls = [
        f"{path.relative_to(ROOT)}:{node.lineno} {node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id}"
        for path in sorted((ROOT / "search" / "analysis").glob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call)
        and (node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)) in _WRITES
    ]
    assert not calls, calls


def _words_in(tree: ast.AST) -> list[tuple[int, str]]:
    """What only search.text may hold: a function or method that writes words (`text`, `*_text`), a command of the
    CLI spelled in a string (docstrings aside: they may name one), and an import of search.text, deferred ones too."""
    docstrings = {
        id(body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and (body := node.body)
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
    }
    hits = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and (node.name == "text" or node.name.endswith("_text")):
            hits.append((node.lineno, f"def {node.name}"))
        elif isinstance(node, ast.Constant) and "prism-search " in str(node.value) and id(node) not in docstrings:
            hits.append((node.lineno, node.value))
        elif isinstance(node, ast.Import):
            hits += [(node.lineno, f"import {a.name}") for a in node.names if _inside(a.name, "search.text")]
        elif isinstance(node, ast.ImportFrom) and node.module and (_inside(node.module, "search.text") or node.module == "search"):
            names = [a.name for a in node.names if _inside(node.module, "search.text") or a.name == "text"]
            hits += [(node.lineno, f"from {node.module} import {name}") for name in names]
    return hits


def test_analysis_writes_no_words():
    """search.analysis returns typed values (a verdict's kind, numbers, reason and next step); every sentence and
    command is written once in search.text, which reads them, so the CLI and the dashboard say the same thing."""
    found = [
        f"{path.relative_to(ROOT)}:{line} {what}"
        for path in sorted((ROOT / "search" / "analysis").rglob("*.py"))
        for line, what in _words_in(ast.parse(path.read_text()))
    ]
    assert not found, "\n".join(found)


def test_the_scan_finds_words():
    """The scan above must be able to fail: each way analysis could write words is caught; a docstring naming a
    command, a value's name and a string that is no command are not."""
    code = (
        '"""Read by `prism-search status`."""\n'
        "def text(self): pass\n"
        "def p_text(p): pass\n"
        'command = f"prism-search confirm {name} --top 1"\n'
        "def f():\n    from search.text import verdict_text\n"
        "import search.text.verdict\n"
        "from search import text\n"
        'def g():\n    """`prism-search resume` trains them."""\n    return "confirm"\n'
        "from search import Study\ntextual = 1\n"
    )
    assert sorted(line for line, _ in _words_in(ast.parse(code))) == [2, 3, 4, 6, 7, 8]


def _cli_holds(tree: ast.Module) -> list[tuple[int, str]]:
    """What the CLI may not hold: a config loader (the study package reads a study's config: `Study.create(...).config`)
    or a module-level builder of words (`text`, `*_text`: search.text writes every sentence the commands print)."""
    hits = [
        (node.lineno, f"def {node.name}")
        for node in tree.body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and (node.name == "text" or node.name.endswith("_text"))
    ]
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and _inside(node.module, "search"):
            loading = _inside(node.module, "search.config.loading")
            hits += [(node.lineno, f"from {node.module} import {a.name}") for a in node.names if loading or a.name == "load_config"]
        elif isinstance(node, ast.Import):
            hits += [(node.lineno, f"import {a.name}") for a in node.names if _inside(a.name, "search.config.loading")]
    return sorted(hits)


def test_the_cli_holds_no_prose_and_parses_no_config():
    """The CLI parses arguments, calls the study, hands the values to a search.text builder and prints what it gets
    back; the help texts and docstrings are its own."""
    assert not (found := _cli_holds(ast.parse((ROOT / "search" / "cli" / "__init__.py").read_text()))), found


def test_the_cli_scan_finds_a_loader_and_a_builder():
    code = (
        "from search.config import load_config, storage_or_default\n"
        "def _cost_text(c): pass\n"
        "def plan():\n    def inner_text(): pass\n"  # a local helper: no module-level builder
        "from search.config.loading import read_toml\n"
        "import search.config.loading\n"
        "json_text = str\n"  # a name bound to an import, no builder
        "def text(): pass\n"
    )
    assert [line for line, _ in _cli_holds(ast.parse(code))] == [1, 2, 5, 6, 8]


def _marked_helpers(source: str) -> list[str]:
    """Functions that carry a pytest mark but are not tests: pytest never reads a mark there (a helper's `e2e` leaves its
    test in the fast tier)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and not node.name.startswith("test"):
            for d in node.decorator_list:
                target = d.func if isinstance(d, ast.Call) else d
                if ast.unparse(target).startswith("pytest.mark."):
                    found.append(f"{node.name} (@{ast.unparse(target)})")
    return found


def test_marks_sit_on_tests():
    misplaced = {
        str(path.relative_to(ROOT)): names
        for path in sorted((ROOT / "tests").rglob("*.py"))
        if (names := _marked_helpers(path.read_text()))
    }
    assert not misplaced, misplaced
    assert _marked_helpers("import pytest\n@pytest.mark.e2e\ndef _run(): pass\n@pytest.mark.e2e\ndef test_x(): pass\n") == [
        "_run (@pytest.mark.e2e)"
    ]
