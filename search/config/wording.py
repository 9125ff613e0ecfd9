"""The words of a config error: one line naming the field, what it holds and the fix, whatever pydantic said."""

from __future__ import annotations

import json
import re
from typing import Any, get_args

from pydantic import BaseModel

from search.config.schema import StudyConfig
from search.outputs.urls import mask_in, mask_url

ECHO_CHARS = 60  # an echoed value longer than this is cut: a 5,000-character name makes an error no one reads


def format_validation_error(errors: list, source: str) -> str:
    """One line naming the field and the fix (the first of a validation's `errors`); an echoed input is cut to a
    readable length, and masked, since a misplaced URL may carry a password."""
    first = errors[0]
    loc = field_loc(first["loc"], keep_last=first["type"] == "extra_forbidden")
    where = ".".join(str(p) for p in loc) or "config"
    msg = first["msg"].removeprefix("Value error, ")
    value = first.get("input")
    expected = _expected(e for e in errors if field_loc(e["loc"]) == loc)  # a union's members: one error each
    if first["type"] == "extra_forbidden":
        msg = "unknown field; check the spelling or remove it"
    elif first["type"] == "missing":
        msg = "required field is missing; add it"
    elif first["type"] == "finite_number":
        msg = f"{value!r} is not a finite number (fix: write a finite value; inf and nan cannot train or be stored)"
    elif expected:
        msg = _wrong_kind(value, expected)
    elif first["type"] == "literal_error":
        shown = repr(value) if isinstance(value, str) else _shown(value)  # a long one is cut with every quoted value
        msg = f"{shown} is not valid; {msg[0].lower()}{msg[1:]}"
    elif "input" in first and not isinstance(value, dict) and first["type"] != "value_error":
        msg = f"{msg} (got {_shown(value)})"
    return _cut_quoted(mask_in(f"{source}: {where}: {msg}", value if isinstance(value, str) else None))


def field_loc(loc: tuple, keep_last: bool = False) -> tuple:
    """`loc` without the union member tags pydantic appends ('constrained-int', "literal['auto']", a tagged
    section's kind such as 'command'): the path of the field as the TOML file spells it. `keep_last`: an unknown
    field's own name."""
    models: list[type[BaseModel]] = [StudyConfig]
    out: list = []
    for i, part in enumerate(loc):
        if isinstance(part, int) or (keep_last and i == len(loc) - 1):
            out.append(part)
            continue
        owner = next((m for m in models if part in m.model_fields), None)
        if owner is not None:
            out.append(part)
            models = _models_in(owner.model_fields[part].annotation)
        elif len(models) < 2:  # a scalar union's member tag, or past the models: the field's path ends here
            break
    return tuple(out)


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models a field's annotation holds: itself, an optional one, or a tagged union's members."""
    found, stack = [], [annotation]
    while stack:
        a = stack.pop()
        if isinstance(a, type) and issubclass(a, BaseModel):
            found.append(a)
        else:
            stack.extend(get_args(a))
    return found


_KINDS = {"int_type": "an integer", "float_type": "a number", "bool_type": "a boolean", "string_type": "a string",
          "list_type": "a list", "tuple_type": "a list", "model_type": "a table", "dict_type": "a table"}  # fmt: skip
_FIXES = {
    "an integer": "write a whole number without quotes, a decimal point or an exponent",
    "a number": "write a number without quotes",
    "a boolean": "write true or false, without quotes",
    "a string": "write it in quotes",
    "a list": "write it in brackets, e.g. [1, 2]",
    "a table": "write it as a [section] or an inline table {key = value}",
}


def _expected(errors: Any) -> list[str]:
    """What the field takes, where its errors say the input was of the wrong kind: ['an integer', '"auto"'];
    empty where an error is about the value itself (a bound, a rule)."""
    out: list[str] = []
    for e in errors:
        if e["type"] == "literal_error":
            out += [json.dumps(w) for w in re.findall(r"'([^']*)'", e["ctx"]["expected"])]
        elif e["type"] in _KINDS:
            out.append(_KINDS[e["type"]])
        else:
            return []
    return out if any(e in _FIXES for e in out) else []


def _wrong_kind(value: Any, expected: list[str]) -> str:
    """`"5" is a string where an integer is expected (fix: ...)`; a float in an integer field is its own mistake."""
    kinds = [k for k in expected if k in _FIXES]
    if "an integer" in kinds and isinstance(value, float) and not isinstance(value, bool):
        return f"{value!r} is not an integer (fix: write a whole number without a decimal point or exponent)"
    named = " or ".join(sorted(w for w in expected if w not in _FIXES) + kinds).replace("an integer", "a number")
    fix = "write a number, e.g. 1 rather than true" if isinstance(value, bool) and "a boolean" not in kinds else _FIXES[kinds[0]]
    return f"{_shown(value)} is {_kind(value)} where {named} is expected (fix: {fix})"


def _kind(value: Any) -> str:
    """A TOML value's kind, in TOML's words."""
    for kind, types in (("a boolean", bool), ("a number", (int, float)), ("a string", str), ("a list", (list, tuple)), ("a table", dict)):
        if isinstance(value, types):
            return kind
    return "a date or time"


def _shown(value: Any) -> str:
    """`value` as TOML spells it (JSON's spelling for the rest), masked, then cut to ECHO_CHARS."""
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False, default=str)
    except ValueError:  # inf or nan inside a list
        text = repr(value)
    text = mask_in(text, value if isinstance(value, str) else None)
    if len(text) <= ECHO_CHARS:
        return text
    length = len(value) if isinstance(value, str) else len(text)
    return f"{text[: ECHO_CHARS - 20]}... ({length:,} characters)"


# a quoted token: its opening quote starts a word and its closing one ends it, so the text between two quoted
# values ("'a': /a/long/path defines no 'b'") is never read as one
_LONG_QUOTED = re.compile(rf"""(?<![\w'"])(['"])([^'"]{{{ECHO_CHARS + 1},}})\1(?!\w)""")


def _cut_quoted(message: str) -> str:
    """Every quoted value longer than ECHO_CHARS in `message` cut to its start and its length: a rule's own text
    (prism's schedule errors, a validator's) echoes the value whole."""
    return _LONG_QUOTED.sub(lambda m: f"{m[1]}{m[2][: ECHO_CHARS - 20]}...{m[1]} ({len(m[2]):,} characters)", message)


def resume_command(config: StudyConfig) -> str:
    """The command that continues a study, as every interrupted or failed run prints it; a password in its storage
    URL is never printed, so it says where it goes."""
    shown = mask_url(config.storage)
    where = "   (your password in place of ***)" if shown != config.storage else ""
    return f"prism-search resume {config.name} --storage {shown}{where}"
