"""Every number a study TOML declares, taken from the config's own field declarations: a boolean, inf or nan there
is refused with one line naming the field, because each would otherwise validate and break a trial or the stored study."""

import math
import tomllib
from dataclasses import fields
from typing import Annotated, get_args, get_origin, get_type_hints

import pytest
from pydantic import BaseModel

from prism import ModelConfig, TrainConfig
from search.config import StudyConfig, load_config, parse_config
from search.errors import ConfigError


def _numeric_fields(model: type[BaseModel] = StudyConfig, prefix: tuple[str, ...] = ()):
    """(dotted path, is_float, is_pair) of every int/float setting, nested sections included; tuples of floats too."""
    for name, info in model.model_fields.items():
        ann, path = info.annotation, (*prefix, name)
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            yield from _numeric_fields(ann, path)
            continue
        args = set(get_args(ann)) if get_origin(ann) is not tuple else set()
        if get_origin(ann) is tuple and set(get_args(ann)) <= {int, float}:
            yield ".".join(path), float in get_args(ann), True
        elif ann in (int, float) or (args and bool not in args and args & {int, float}):
            yield ".".join(path), float in (args or {ann}), False


NUMERIC = list(_numeric_fields())
FLOATS = [(path, pair) for path, is_float, pair in NUMERIC if is_float]


def test_the_walk_finds_the_settings_it_must():
    """The class below is only as good as this enumeration: spot-check it against fields the issue named."""
    paths = {path for path, _, _ in NUMERIC}
    assert {"train.lr", "train.weight_decay", "train.grad_clip", "search.min_throughput_ratio", "train.steps"} <= paths
    assert {"model.n_layer", "model.block_size", "train.batch_size", "seed", "n_trials", "space.late_zone"} <= paths
    assert "model.bias" not in paths and "train.compile" not in paths  # real booleans stay booleans
    assert len(FLOATS) >= 12


def _config_with(path: str, value) -> dict:
    data: dict = {"name": "x"}
    *sections, key = path.split(".")
    node = data
    for section in sections:
        node = node.setdefault(section, {})
    node[key] = value
    return data


def _value(path: str, pair: bool, bad):
    """`bad` in the field's place; for a pair, in its first element beside the default's second."""
    if not pair:
        return bad
    section, key = path.split(".")
    default = type(getattr(StudyConfig(name="x"), section)).model_fields[key].default
    return [bad, default[1]]


@pytest.mark.parametrize("path, is_float, pair", NUMERIC, ids=[p for p, _, _ in NUMERIC])
@pytest.mark.parametrize("flag", [True, False])
def test_a_boolean_where_a_number_is_declared_is_refused(path, is_float, pair, flag):
    with pytest.raises(ConfigError) as info:
        parse_config(_config_with(path, _value(path, pair, flag)), "study.toml")
    message = str(info.value)
    assert message.startswith(f"study.toml: {path}{'.0' if pair else ''}: ") and "is a boolean where a number is expected (fix: " in message
    assert "\n" not in message


@pytest.mark.parametrize("path, pair", FLOATS, ids=[p for p, _ in FLOATS])
@pytest.mark.parametrize("bad", [math.inf, -math.inf, math.nan], ids=["inf", "-inf", "nan"])
def test_a_non_finite_float_is_refused(path, pair, bad):
    with pytest.raises(ConfigError) as info:
        parse_config(_config_with(path, _value(path, pair, bad)), "study.toml")
    message = str(info.value)
    assert message.startswith(f"study.toml: {path}") and "is not a finite number (fix: " in message
    assert "\n" not in message


def test_inf_and_true_written_in_toml_are_refused_from_the_file(tmp_path):
    """TOML spells them `inf`, `nan` and `true`: the file path the CLI reads gives the same one-line errors."""
    for line, fragment in (("lr = inf", "train.lr: inf is not a finite number"), ("steps = true", "train.steps: true is a boolean")):
        path = tmp_path / "study.toml"
        path.write_text(f'name = "x"\n[train]\n{line}\n')
        assert tomllib.loads(path.read_text())["train"]  # it is valid TOML: only the config can refuse it
        with pytest.raises(ConfigError, match=fragment):
            load_config(path)


@pytest.mark.parametrize("cls", [ModelConfig, TrainConfig])
def test_the_library_dataclasses_refuse_the_same_values(cls):
    """prism's own configs, used without the service, apply the same rule to every float they declare."""
    hints = get_type_hints(cls)
    floats = [f.name for f in fields(cls) if hints[f.name] is float]
    ints = [f.name for f in fields(cls) if hints[f.name] is int]
    assert floats and ints
    for name in floats:
        for bad in (math.inf, math.nan, True):
            with pytest.raises(ValueError, match=f"{name} must be a finite number"):
                cls(**{name: bad})
    for name in ints:
        with pytest.raises(ValueError, match=f"{name} must be an integer"):
            cls(**{name: True})


def _bounds(path: str) -> dict[str, float]:
    """The field's bounds as declared (pydantic's metadata: Gt/Ge/Lt/Le), keyed gt/ge/lt/le."""
    *sections, key = path.split(".")
    model: type[BaseModel] = StudyConfig
    for section in sections:
        model = model.model_fields[section].annotation  # type: ignore[assignment]
    field = model.model_fields[key]
    numbers = [a for a in get_args(field.annotation) if get_origin(a) is Annotated]  # int bounded, or a word ("auto")
    out: dict[str, float] = {}
    for item in field.metadata + [m for a in numbers for m in get_args(a)[1:]]:
        out |= {k: getattr(item, k) for k in ("gt", "ge", "lt", "le") if getattr(item, k, None) is not None}
    return out


BOUNDED = [(path, is_float) for path, is_float, pair in NUMERIC if not pair]  # a pair (late_zone) is checked as a whole


@pytest.mark.parametrize("path, is_float", BOUNDED, ids=[p for p, _ in BOUNDED])
def test_every_number_has_a_lower_and_an_upper_bound_and_a_value_past_it_is_refused(path, is_float):
    """The bounds table is the field declarations themselves: each number is bounded both ways (seed -1,
    baseline_seeds 1e23, lr 1e300, steps 1e23 were stored and then broke or never ended), and past the upper bound
    the error names the field and the bound before anything is written."""
    bounds = _bounds(path)
    assert {"gt", "ge"} & bounds.keys() and {"lt", "le"} & bounds.keys(), bounds
    upper = bounds.get("le", bounds.get("lt"))
    past = upper * 10 + 1 if is_float else int(upper) * 10 + 1
    with pytest.raises(ConfigError) as info:
        parse_config(_config_with(path, past), "study.toml")
    message = str(info.value)
    assert message.startswith(f"study.toml: {path}: ") and "less than" in message and "\n" not in message, message


INTS = [path for path, is_float, pair in NUMERIC if not is_float]


@pytest.mark.parametrize("path", INTS)
@pytest.mark.parametrize("bad, fragment", [(3.0, "is not an integer"), (1e23, "is not an integer"), ("5", "is a string")])
def test_an_integer_field_takes_only_an_integer(path, bad, fragment):
    """`n_layer = 3.0`, `steps = 1e23` and `n_layer = "5"` were accepted as integers."""
    with pytest.raises(ConfigError) as info:
        parse_config(_config_with(path, bad), "study.toml")
    assert str(info.value).startswith(f"study.toml: {path}: ") and fragment in str(info.value), info.value


@pytest.mark.parametrize("path, pair", FLOATS, ids=[p for p, _ in FLOATS])
def test_a_float_field_takes_an_integer_but_not_a_string(path, pair):
    with pytest.raises(ConfigError, match=f'{path}{".0" if pair else ""}: "0.5" is a string'):
        parse_config(_config_with(path, _value(path, pair, "0.5")), "study.toml")
