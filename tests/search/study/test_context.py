"""Following the stored config through a command: each value is resolved once, at the command's edge, and handed
down in the study's context (search.runner.context). Counted on real commands, run in process: the real functions,
each wrapped to count its calls wherever a module bound it."""

import collections
import functools
import importlib
import sys

import pytest
from typer.testing import CliRunner

from search.cli import app
from tests.search.conftest import ROOT

pytestmark = pytest.mark.e2e

# what a command resolves; each is the function every caller reaches, whichever module it was imported into
RESOLVERS = {
    "parse_config": "search.config",  # a config parsed once, the command line's flags with it
    "make_family": "search.families",  # the schedule space: built once, by the parse (StudyConfig.family)
    "stored_config": "search.storage.records",
    "make_trackers": "search.tracking",
    "open_storage": "search.storage.database",
    "load_corpus": "prism.data",  # read (or its BPE trained) once by preflight, which hands on the fingerprint
    "check_cluster": "search.runner.cluster",
}
# every module the commands call into, loaded before counting (a later import would bind the uncounted function)
COMMAND_MODULES = (
    "search.study",
    "search.analysis",
    "search.runner.preflight",
    "search.cli.progress",
    "search.runner.driver",
    "search.runner.undelivered",
)


@pytest.fixture
def calls(monkeypatch) -> collections.Counter:
    for module in COMMAND_MODULES:
        importlib.import_module(module)
    counts: collections.Counter = collections.Counter()

    def counted(name, fn):
        @functools.wraps(fn)
        def call(*args, **kwargs):
            counts[name] += 1
            return fn(*args, **kwargs)

        return call

    originals = {id(fn): (name, fn) for name, home in RESOLVERS.items() if (fn := getattr(importlib.import_module(home), name))}
    wrappers = {key: counted(name, fn) for key, (name, fn) in originals.items()}
    for module_name, module in list(sys.modules.items()):
        if module is None or not module_name.startswith(("search", "prism")):
            continue
        for attr, value in list(vars(module).items()):
            if id(value) in wrappers and value is originals[id(value)][1]:
                monkeypatch.setattr(module, attr, wrappers[id(value)])
    return counts


def test_run_resume_and_confirm_resolve_each_value_once(ray_local, calls, tmp_path, monkeypatch):
    """The config is parsed once per command, its flags with it, and its schedule space built once (by the parse).
    On every heartbeat (1 s here) the driver used to parse the stored config again, and `resume` opened the
    storage, loaded the study, checked the cluster and made the trackers twice or more, and every command that
    trains loaded the corpus twice (preflight's check, then its fingerprint), and the summary a command printed at
    its end parsed the stored config once more."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PRISM_SEARCH_HEARTBEAT_S", "1")
    toml = tmp_path / "tiny.toml"
    toml.write_text((ROOT / "studies" / "tiny.toml").read_text().replace("steps = 60", "steps = 20"))
    url = ["--storage", f"sqlite:///{tmp_path / 'tiny.db'}"]
    once = {"parse_config": 1, "make_family": 1, "make_trackers": 1, "open_storage": 1, "load_corpus": 1, "check_cluster": 1}
    for command, stored_configs in (
        (["run", str(toml), *url, "--n-trials", "3"], 0),  # the config is the file's
        (["resume", "tiny", *url, "--n-trials", "4"], 1),  # reopen's
        (["confirm", "tiny", "--top", "1", "--seeds", "2", *url], 1),  # reopen's: confirm prints its own rows
    ):
        calls.clear()
        result = CliRunner().invoke(app, command)
        assert result.exit_code == 0, result.output
        assert "trained" in result.output or "confirmation" in result.output
        assert calls == collections.Counter(once | {"stored_config": stored_configs}), command[0]


def test_the_model_config_baseline_and_space_are_resolved_by_the_parse(tiny_config):
    """Read on every trial (the driver's spec, enqueueing, the summary): the same objects each time, never rebuilt."""
    assert tiny_config.model_config_ is tiny_config.model_config_ and tiny_config.baseline is tiny_config.baseline
    assert tiny_config.family is tiny_config.family and str(tiny_config.baseline) == "1x3"
    copied = tiny_config.model_copy(update={"n_trials": 3})  # what --prior auto's keeping_checkpoints does
    assert copied.family is tiny_config.family and copied.model_config_ is tiny_config.model_config_
    space = tiny_config.space.model_copy(update={"family": "uniform"})
    assert tiny_config.model_copy(update={"space": space}).family.name == "uniform"  # a copy with another space
