"""Export a study's finished trials as flat rows: one column per layer's head count, CSV or JSON."""

from __future__ import annotations

import csv
import io

import optuna

from search import jsonout
from search.analysis.constraints import is_feasible
from search.attrs import (
    DUPLICATE_ATTR,
    FLOPS_PER_TOKEN,
    N_PARAMS,
    PRUNED_AT_RUNG,
    PRUNED_AT_TOKENS,
    REFERENCE,
    ROLE,
    SCHEDULE,
    SEED,
    THROUGHPUT_RATIO,
    TOKENS_PER_S,
    heads_attr,
)
from search.config import StudyConfig
from search.storage.records import FINISHED

_ATTRS = (
    ROLE,
    SEED,
    SCHEDULE,
    TOKENS_PER_S,
    THROUGHPUT_RATIO,
    N_PARAMS,
    FLOPS_PER_TOKEN,
    PRUNED_AT_TOKENS,
    PRUNED_AT_RUNG,
    DUPLICATE_ATTR,
    REFERENCE,
)


def rows(study: optuna.Study, config: StudyConfig) -> list[dict]:
    """Every finished trial of `study` (whose config is `config`) as one flat row."""
    out = []
    for t in study.get_trials(deepcopy=False, states=FINISHED):
        row = {"number": t.number, "state": t.state.name}
        row |= dict(zip(config.search.objectives, t.values or [None] * len(config.search.objectives)))
        row |= {key: t.user_attrs.get(key) for key in _ATTRS}
        row["feasible"] = is_feasible(t)
        row |= {f"layer_{i:02d}": t.user_attrs.get(heads_attr(i)) for i in range(config.model.n_layer)}
        out.append(row)
    return out


def render(study: optuna.Study, config: StudyConfig, fmt: str) -> str:
    data = rows(study, config)
    if fmt == "json":
        return jsonout.dumps(data, indent=2)
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(data[0]) if data else ["number"], lineterminator="\n")
    writer.writeheader()
    writer.writerows(data)
    return buffer.getvalue()
