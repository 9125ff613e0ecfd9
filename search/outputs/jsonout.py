"""JSON the project writes for others to read (export, dashboard figures, report): valid JSON always. Python's
`json` writes inf and nan as `Infinity`/`NaN`, which no JSON parser (a browser's included) accepts; a trial value
Optuna stored as inf (a diverged run, another tool's trial) is written as null, "no value". Imports nothing of
the project."""

from __future__ import annotations

import json
import math
from typing import Any


def finite(value: Any) -> Any:
    """`value` with every non-finite float inside it (dicts, lists, tuples) replaced by None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def dumps(value: Any, **kw: Any) -> str:
    return json.dumps(finite(value), allow_nan=False, **kw)
