"""Any value TOML can spell, in any field of any section, is either a valid config or one line naming the field
(exit 2 from the CLI), never a traceback: the field walk and the value strategy below cover settings added later."""

from __future__ import annotations

import datetime as dt
import json
import math
import tomllib
import types
from typing import Any, Union, get_args, get_origin

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from search.config import StudyConfig, parse_config
from search.errors import ConfigError
from tests.search.test_cli_errors import run_cli


def _section_model(annotation: Any) -> type[BaseModel] | None:
    """The section model a field declares, optional (experiment) or not."""
    for candidate in (annotation, *(get_args(annotation) if get_origin(annotation) in (Union, types.UnionType) else ())):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def _paths(model: type[BaseModel] = StudyConfig, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every field, a section itself included (`model = 5` is a mistake too)."""
    out = []
    for name, info in model.model_fields.items():
        out.append((*prefix, name))
        if (section := _section_model(info.annotation)) is not None:
            out += _paths(section, (*prefix, name))
    return out


PATHS = _paths()

_scalars = (
    st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(st.characters(exclude_categories=("Cs",)), max_size=30)
    | st.text("ab", min_size=200, max_size=6000)  # a long value is echoed cut, never whole
    | st.datetimes(max_value=dt.datetime(9999, 1, 1))
    | st.dates()
    | st.times()
)
TOML_VALUES = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text("abcxyz_", min_size=1, max_size=5), inner, max_size=3),
    max_leaves=6,
)


def _toml(value: Any) -> str:
    """`value` as a TOML inline value (strings as JSON strings, which TOML's basic strings read alike; no TOML writer
    is a dependency of the project)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf") if math.isinf(value) else repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")  # TOML escapes DEL too
    if isinstance(value, (dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {_toml(v)}" for k, v in value.items()) + "}"
    return str(value)


def _document(path: tuple[str, ...], value: Any) -> str:
    """A study TOML named `x` with `value` at `path` (tiny sizes, so a valid result trains nothing big)."""
    *sections, key = path
    line = f"{key} = {_toml(value)}"
    if not sections:
        return f"{line}\n" if key == "name" else f'name = "x"\n{line}\n'
    return f'name = "x"\n[{".".join(sections)}]\n{line}\n'


def test_the_walk_reaches_every_section_and_setting():
    dotted = {".".join(p) for p in PATHS}
    assert {"name", "seed", "model", "model.n_layer", "search.racing", "space.late_zone", "experiment.looks", "tracking.wandb"} <= dotted
    assert len(PATHS) > 60


@pytest.mark.parametrize(
    "path, value",
    [(("model", "n_layer"), [[1]]), (("model", "n_layer"), {"a": 1}), (("seed",), {"a": 1}), (("space", "late_zone"), {"a": 1})],
    ids=["list-of-list", "table", "seed-table", "pair-table"],
)
def test_a_list_or_table_where_a_number_is_declared_is_one_line(path, value, tmp_path, monkeypatch, capsys):
    (tmp_path / "bad.toml").write_text(_document(path, value))
    code, out, err = run_cli(monkeypatch, capsys, tmp_path, "run", "bad.toml")
    assert code == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith("error: bad.toml") and f" {'.'.join(path)}: " in err and "(fix: " in err, err


@pytest.mark.parametrize("text", ['[{"a" = [0]}]', "5", "{a = 1}"])
def test_a_storage_that_is_no_url_is_refused_not_replaced_by_the_default(text, tmp_path, monkeypatch, capsys):
    """The study's storage once stood in for a bad one in the parse: `run` then trained in the default database."""
    (tmp_path / "bad.toml").write_text(f'name = "x"\nstorage = {text}\n')
    code, out, err = run_cli(monkeypatch, capsys, tmp_path, "run", "bad.toml")
    assert code == 2 and err.startswith("error: bad.toml: storage: ") and err.count("\n") == 1, (code, out, err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.toml"]


@pytest.mark.parametrize("text", ['"yes"', '"true"', "1", "0.0", "[true]"])
def test_a_boolean_setting_takes_only_a_boolean(text):
    with pytest.raises(ConfigError) as info:
        parse_config(tomllib.loads(f"name = 'x'\n[search]\nracing = {text}\n"), "s.toml")
    assert str(info.value).startswith("s.toml: search.racing: ") and "a boolean is expected (fix: write true or false" in str(info.value)


def test_a_long_value_is_echoed_cut_to_a_readable_length():
    name = "n" * 5000
    with pytest.raises(ConfigError) as info:
        parse_config({"name": name}, "s.toml")
    message = str(info.value)
    assert message.startswith("s.toml: name: ") and "5,000 characters" in message and len(message) < 300, message
    with pytest.raises(ConfigError) as info:
        parse_config({"name": "x", "data": {"corpus": "/no/such/" + "c" * 5000}}, "s.toml")
    assert len(str(info.value)) < 400 and "data.corpus: unknown corpus" in str(info.value), str(info.value)


@given(path=st.sampled_from(PATHS), value=TOML_VALUES)
@settings(max_examples=300, deadline=None)
def test_any_toml_value_anywhere_is_a_config_or_one_line(path, value):
    """The function `run` reads its file with: a StudyConfig or a one-line ConfigError naming the field."""
    text = _document(path, value)
    data = tomllib.loads(text)  # the emitter writes TOML the reader reads back
    try:
        parse_config(data, "bad.toml")
    except ConfigError as e:
        message = str(e)
        assert "\n" not in message and len(message) < 600, message
        assert message.startswith((f"bad.toml: {path[0]}", "bad.toml: config: ")), message  # the field, or a rule across fields


NEVER_VALID = st.dictionaries(st.just("a"), TOML_VALUES, min_size=1) | st.lists(
    st.lists(TOML_VALUES, max_size=2) | st.dictionaries(st.just("a"), TOML_VALUES), min_size=1, max_size=2
)  # no section has a field `a`, and no setting is a list of lists or of tables


@given(path=st.sampled_from(PATHS), value=NEVER_VALID)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_the_cli_answers_an_invalid_value_in_any_field_with_exit_2_and_one_line(path, value, tmp_path, monkeypatch, capsys):
    """`prism-search run bad.toml` refuses it before anything is stored or trained."""
    (tmp_path / "bad.toml").write_text(_document(path, value))
    code, out, err = run_cli(monkeypatch, capsys, tmp_path, "run", "bad.toml")
    assert code == 2 and out == "" and err.startswith("error: bad.toml") and err.count("\n") == 1, (code, out, err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.toml"]
