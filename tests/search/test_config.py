import json
import tomllib

import pytest

from prism import load_corpus
from search.config import DataSection, Flags, ModelSection, StudyConfig, load_config, parse_config, references_for
from search.errors import ConfigError
from search.runner.preflight import check_corpus
from search.study.pruning import budget_tokens, rungs
from tests.search.conftest import ROOT


def test_tiny_config_loads_with_defaults(tiny_config):
    assert tiny_config.model.n_layer == 3 and tiny_config.space.family == "ramp"
    assert str(tiny_config.baseline) == "1x3"  # head dim 64 at d_model 64
    assert parse_config({"name": "x"}).baseline.heads == (2,) * 6  # d_model 128 -> 2 heads of 64


def test_a_config_stored_before_the_defaults_changed_keeps_what_it_trained():
    """New configs train nanoGPT's exact GELU with fused AdamW; a stored one that names neither (written before
    the defaults changed) keeps GPT-2's tanh GELU and fused-on-CUDA-only AdamW, so its study resumes as it ran."""
    new, stored = parse_config({"name": "x"}), parse_config({"name": "x"}, stored=True)
    assert (new.model.mlp, new.train.fused_adamw) == ("gelu-exact", "always")
    assert (stored.model.mlp, stored.train.fused_adamw) == ("gelu", "cuda")
    named = parse_config({"name": "x", "model": {"mlp": "swiglu"}, "train": {"fused_adamw": "always"}}, stored=True)
    assert (named.model.mlp, named.train.fused_adamw) == ("swiglu", "always")  # what a stored config names stands
    flagged = parse_config({"name": "x"}, stored=True, flags=Flags(n_trials=3))
    assert (flagged.model.mlp, flagged.n_trials) == ("gelu", 3)  # the command line's flags keep what was stored


def test_a_new_study_confirms_in_rounds_and_a_stored_one_resumes_with_the_strategy_it_was_made_with():
    """The promoted arm of docs/benchmarks.md is the default of new configs (the additive sampler, one baseline at
    the search seed, 17 proposals, two rounds); a study stored before `confirmation` existed confirms by hand."""
    new = parse_config({"name": "x"})
    assert (new.search.confirmation, new.search.sampler, new.search.baseline_seeds, new.n_trials) == ("rounds", "additive", 1, 18)
    assert (new.search.explore, new.search.n_startup_trials, new.search.confirm_top, new.search.confirm_seeds) == (0.25, 4, 3, 4)
    stored = parse_config({"name": "x", "search": {"sampler": "tpe", "baseline_seeds": 3}}, stored=True)
    assert (stored.search.confirmation, stored.search.sampler, stored.search.baseline_seeds) == ("manual", "tpe", 3)
    assert parse_config({"name": "x", "search": {"confirmation": "rounds"}}, stored=True).search.confirmation == "rounds"
    with pytest.raises(ConfigError, match=r"search.confirmation"):
        parse_config({"name": "x", "search": {"confirmation": "auto"}})


def test_the_command_lines_flags_are_checked_by_the_configs_own_bounds():
    config = parse_config({"name": "x", "resources": {"cpus_per_trial": 2}}, flags=Flags(n_trials=7, workers=3, storage="sqlite:///f.db"))
    assert (config.n_trials, config.resources.workers, config.resources.cpus_per_trial, config.storage) == (7, 3, 2, "sqlite:///f.db")
    with pytest.raises(ConfigError, match=r"^config with the command line's --n-trials: n_trials: .*less than or equal to 1000000"):
        parse_config({"name": "x"}, flags=Flags(n_trials=10**7))
    with pytest.raises(ConfigError, match=r"^config: name: "):  # a field no flag set is named as the file's
        parse_config({"name": "."}, flags=Flags(n_trials=3, storage="sqlite:///f.db"))
    tracked = parse_config({"name": "x"}, flags=Flags(track=("tensorboard=tb",)))
    assert tracked.tracking.tensorboard is not None and tracked.tracking.tensorboard.endswith("/tb")


@pytest.mark.parametrize(
    "field, message",
    [
        ({"storage": 5}, "config: storage: 5 is a number where a string is expected"),
        ({"storage": ["postgresql+psycopg://ada:s3cret@db/prism"]}, "config: storage: .*ada:\\*\\*\\*@db/prism"),
        ({"n_trials": 0}, "config: n_trials: .*greater than 0"),
        ({"n_trials": "5"}, 'config: n_trials: "5" is a string where a number is expected'),
        ({"resources": 5}, "config: resources: 5 is a number where a table is expected"),
        ({"resources": {"workers": 0}}, "config: resources.workers: .*greater than 0"),
    ],
)
def test_a_field_a_flag_replaces_is_still_checked_as_the_file_wrote_it(field, message):
    flags = Flags(storage="sqlite:///f.db", n_trials=3, workers=2)
    with pytest.raises(ConfigError, match=f"^{message}") as info:
        parse_config({"name": "x"} | field, flags=flags)
    assert "s3cret" not in str(info.value)
    assert parse_config({"name": "x", "storage": "sqlite:///file.db", "n_trials": 9}, flags=flags).storage == "sqlite:///f.db"


@pytest.mark.parametrize(
    "data, message",
    [
        ({"name": "x", "modle": {}}, "config.*modle: unknown field"),
        ({"name": "x", "model": {"dh_min": 48}}, "model.dh_min: 48 is not a power of two; use 32 or 64"),
        ({"name": "x", "model": {"d_model": -4}}, "model.d_model: .*greater than 0"),
        ({"name": "x", "train": {"steps": 0}}, "train.steps: .*greater than 0"),
        ({"name": "x", "space": {"baseline_heads": 3}}, "space.baseline_heads=3 is not allowed for d_model=128"),
        ({"name": "x", "space": {"references": ["3x6"]}}, "space.references '3x6'.*do not divide d_model=128"),
        (
            {"name": "x", "space": {"family": "zigzag"}},
            r"space.family: 'zigzag' is not valid; input should be 'ramp', 'ramp\+late', 'free' or 'uniform'",
        ),
        ({"name": "x", "model": {"d_model": 100}}, "no power-of-two head dim .* divides d_model=100"),
        ({"name": "x", "data": {"corpus": "wiki"}}, "data.corpus: unknown corpus 'wiki'"),
        ({"name": "x", "data": {"corpus": "mqar:pairs=4,value=8"}}, "data.corpus: .*cannot read 'value=8'; write SETTING=INT"),
        ({}, "name: required field is missing"),
        (
            {"name": "x", "resources": {"gpus_per_trial": 1.5}},
            "resources.gpus_per_trial: 1.5 GPUs: must be less than or equal to 1, as a trial trains on one GPU",
        ),
        ({"name": "x", "resources": {"gpus_per_trial": 2}}, r"resources.gpus_per_trial: 2 GPUs: .*sit idle; use 1 .* or a fraction"),
    ],
)
def test_bad_config_gives_one_line_error_naming_the_field(data, message):
    with pytest.raises(ConfigError, match=message) as info:
        parse_config(data, "config")
    assert "\n" not in str(info.value)


def test_a_synthetic_task_is_a_corpus_checked_before_anything_runs():
    config = parse_config({"name": "x", "data": {"corpus": "mqar:pairs=4,key_len=2"}, "model": {"block_size": 16}})
    assert config.data.corpus == "mqar:pairs=4,key_len=2"  # a name, never made a path
    assert len(check_corpus(config)) == 16
    with pytest.raises(ConfigError, match=r"^data.corpus: .*block_size=8 has no room for a query .*block_size >= 14"):
        check_corpus(parse_config({"name": "x", "data": {"corpus": "mqar:pairs=4,key_len=2"}, "model": {"block_size": 8}}))


def test_the_models_vocab_follows_the_data_unless_the_config_sets_it():
    """A task of 20 tokens trained with the bytes' 256 embeddings is another, harder model:
    a model that leaves vocab_size out embeds the vocabulary its data has."""
    task = {"corpus": "pointer:digits=2,base=4,symbols=16"}
    assert parse_config({"name": "x", "data": task}).model_config_.vocab_size == load_corpus(task["corpus"]).vocab_size == 20
    assert parse_config({"name": "x"}).model.vocab_size == 256
    assert parse_config({"name": "x", "data": {"tokenizer": "bpe"}}).model.vocab_size == 4096
    assert parse_config({"name": "x", "data": {"tokenizer": "bpe", "vocab_size": 512}}).model.vocab_size == 512
    assert parse_config({"name": "x", "data": task, "model": {"vocab_size": 64}}).model.vocab_size == 64  # set: it stands
    built = StudyConfig(name="x", model=ModelSection(d_model=64), data=DataSection(**task))  # from Python, sections built
    assert (built.model.vocab_size, built.model.d_model) == (20, 64)
    assert StudyConfig(name="x", model=ModelSection(vocab_size=64), data=DataSection(**task)).model.vocab_size == 64
    made = parse_config({"name": "x", "data": task, "model": {"vocab_size": 256}})
    assert parse_config(json.loads(made.model_dump_json()), stored=True).model.vocab_size == 256  # a stored study keeps its own
    with pytest.raises(ConfigError, match=r"^config: data.vocab_size: true is a boolean"):
        parse_config({"name": "x", "data": {"vocab_size": True}})  # bad data is named as data, never as the model


def test_an_echoed_input_is_masked():
    """A URL in the wrong type of field is echoed back in the error: without its password."""
    with pytest.raises(ConfigError) as info:
        parse_config({"name": "x", "storage": ["postgresql+psycopg://ada:s3cret@db/prism"]}, "config")
    assert 'storage: ["postgresql+psycopg://ada:***@db/prism"] is a list where a string is expected' in str(info.value)
    assert "s3cret" not in str(info.value)


def test_missing_file_and_bad_toml(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "nope.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("name = \n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(bad)


@pytest.mark.parametrize(
    "search, space, message",
    [
        (
            {"sampler": "cmaes"},
            {},
            r"search.sampler: 'cmaes' is not valid; input should be 'tpe', 'gp', 'nsga2', 'random', 'grid' or 'additive'",
        ),
        ({"pruner": "asha"}, {}, r"search.pruner: 'asha' is not valid"),
        ({}, {"family": "ramp+late", "late_zone": [0.7, 0.8]}, r"space.family='ramp\+late': late zone 0.7-0.8 holds no layer of n_layer=6"),
        ({}, {"late_zone": [0.9, 0.5]}, r"space.late_zone: \[0.9, 0.5\] must satisfy 0 < start <= end < 1"),
        ({"sampler": "grid"}, {"family": "free"}, r"search.sampler='grid' cannot enumerate the 15,625 schedules of the 'free' space"),
        ({"objectives": ["val_loss", "throughput"]}, {}, r"pruner='hyperband' cannot stop multi-objective trials"),
        ({"objectives": ["val_loss", "tokens_per_s"]}, {}, r"'tokens_per_s' is raw speed, .*; use 'throughput' \(paired ratio"),
        ({"objectives": ["tokens_per_s"]}, {}, r"search.objectives: \['tokens_per_s'\] must be \['val_loss'\] or"),
        ({"objectives": ["val_loss", "val_loss"]}, {}, r"search.objectives: .* no repeats"),
        ({"min_throughput_ratio": 0}, {}, r"search.min_throughput_ratio: Input should be greater than 0"),
        ({}, {"references": ["fancy"]}, r"space.references 'fancy': unknown reference name 'fancy'; use .* paper-ramp"),
    ],
)
def test_bad_search_settings_are_one_line_errors(search, space, message):
    # 6 layers, d_model 256, head dims 16-256: counts 1, 2, 4, 8, 16, so the free space holds 5^6 = 15,625
    data = {"name": "x", "model": {"d_model": 256, "dh_min": 16, "dh_max": 256}, "search": search, "space": space}
    with pytest.raises(ConfigError, match=message) as info:
        parse_config(data, "config")
    assert "\n" not in str(info.value)


def test_paper_ramp_reaches_the_baseline_count_by_relative_depth_029():
    config = parse_config(
        {
            "name": "x",
            "model": {"n_layer": 12, "d_model": 256, "dh_min": 32, "dh_max": 256},
            "space": {"references": ["paper-ramp", "wide-early=1x4,4x8"]},
        }
    )
    assert str(config.baseline) == "4x12"  # head dim 64
    refs = references_for(config)
    assert [r.name for r in refs] == ["paper-ramp", "wide-early"]
    # counts 1, 2, 4 up to the baseline's 4 heads by layer ceil(0.29 * 12) = 4, then 4 heads to the end
    assert str(refs[0].schedule) == "1x2,2x2,4x8"
    assert str(refs[1].schedule) == "1x4,4x8"


@pytest.mark.parametrize("path", sorted((ROOT / "studies").glob("*.toml")), ids=lambda p: p.name)
def test_every_shipped_study_config_is_valid(path):
    """`stored`: the disk is not consulted, so the GPU recipe validates without its corpus on this machine."""
    config = parse_config(tomllib.loads(path.read_text()), path.name, stored=True)
    if config.name == "gpu-124m":  # short budgets misrank schedules (docs/results.md): the recipe prunes late
        assert rungs(config) and min(rungs(config)) >= budget_tokens(config)[1] // 2


_EXPERIMENT = {
    "name": "x",
    "n_trials": 40,
    "model": {"dh_min": 32, "dh_max": 128},
    "search": {"baseline_seeds": 1, "pruner": "none"},
    "experiment": {"schedule": "2x3,4x3"},
}


def _with(**sections) -> dict:
    out = {k: dict(v) if isinstance(v, dict) else v for k, v in _EXPERIMENT.items()}
    for key, value in sections.items():
        out[key] = out.get(key, {}) | value if isinstance(value, dict) else value
    return out


def test_an_experiment_config_is_its_plan():
    x = parse_config(_EXPERIMENT).experiment
    assert x is not None and x.looks == [10, 15, 20] and x.alpha == 0.05


@pytest.mark.parametrize(
    "data, message",
    [
        (_with(experiment={"schedule": "2x6"}), "experiment.schedule '2x6' is the uniform baseline itself"),
        (_with(experiment={"schedule": "3x6"}), "experiment.schedule '3x6': .*divide"),
        (_with(experiment={"schedule": "2x3,4x3", "looks": [10, 10]}), r"experiment.looks: \[10, 10\] must increase strictly"),
        (_with(experiment={"schedule": "2x3,4x3", "looks": [2, 20]}), "experiment.looks.0: .*greater than or equal to 3"),
        (_with(experiment={"schedule": "2x3,4x3", "alpha": 0.5}), "experiment.alpha: .*less than 0.5"),
        (_with(n_trials=30), r"n_trials=30: an experiment trains 2 runs per pair \(fix: n_trials = 40\)"),
        (_with(resources={"workers": 4}), r"resources.workers=4: both runs of a pair train at once \(fix: workers = 2\)"),
        (_with(search={"baseline_seeds": 3}), r"search.baseline_seeds: .*\(fix: baseline_seeds = 1\)"),
        (_with(space={"references": ["2x2,4x4"]}), r"space.references: an experiment trains only its pairs"),
        (_with(search={"baseline_seeds": 1, "racing": True}), r"search.racing: an experiment is its own race"),
    ],
)
def test_an_experiment_that_would_run_anything_but_its_pairs_is_refused(data, message):
    with pytest.raises(ConfigError, match=message) as e:
        parse_config(data)
    assert "\n" not in str(e.value)


def test_only_a_long_quoted_value_is_cut_never_the_text_between_two_quoted_values():
    from search.config.wording import _cut_quoted

    path = "/tmp/" + "x" * 80 + "/train_gpt.py"
    between = f"function 'train_gpt:nope': {path} defines no 'nope'; fix the name after the ':'"
    assert _cut_quoted(between) == between
    long = "name: '" + "a" * 5000 + "' is not a plain name"
    assert _cut_quoted(long).endswith("...' (5,000 characters) is not a plain name") and len(_cut_quoted(long)) < 120
