"""Reading the JSON files the priors commands write (profiles, priors), with one-line errors naming the fix."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TypeVar

from pydantic import TypeAdapter, ValidationError

T = TypeVar("T")


def read_versioned_json(path: str | Path, fmt: str, what: str, made_by: str, error: type[Exception]) -> dict:
    """The JSON object in `path` whose "format" is `fmt`; otherwise `error` saying how to make one (`made_by`)."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise error(f"{what} {str(path)!r} not found; write one with {made_by}") from None
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise error(f"{path} is not JSON; pass a {what} written by {made_by}") from None
    if not isinstance(data, dict) or data.get("format") != fmt:
        raise error(f"{path} is not a {what} (format is not {fmt!r}); pass one written by {made_by}")
    return data


def typed(adapter: TypeAdapter[T], data: object, where: str, what: str, fix: str, error: type[Exception]) -> T:
    """`data` as the type `adapter` checks (numbers from strings, lists to tuples); otherwise `error`, one line
    naming the first malformed field and the `fix`."""
    try:
        return adapter.validate_python(data, strict=False)
    except ValidationError as e:
        first = e.errors()[0]
        name = ".".join(str(p) for p in first["loc"])
        raise error(f"{where}: the {what}'s {name} is malformed ({first['msg']}); {fix}") from None
