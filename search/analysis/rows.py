"""One trial as every reader shows it: `TrialRow`, built from a stored trial once, for `Study.trials()`, every
export format and the dashboard alike.

A row keeps what the stored trial says, decoded: its objectives as told (`values`, by metric name), the val loss a
display sorts by (the objective of a COMPLETE trial, else the last value it reported), the paired speed, the
per-layer head counts, the learning curve, where it ran and why it failed. `columns` flattens it into the export's
fixed columns.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import datetime

import optuna
from optuna.trial import FrozenTrial, TrialState

from prism import Schedule, ScheduleError
from search.analysis.constraints import is_feasible
from search.attrs import (
    ATTR_AUDIT,
    CURVE,
    DUPLICATE_ATTR,
    ERROR,
    FLOPS_PER_TOKEN,
    HEADS_PREFIX,
    N_PARAMS,
    PRUNED_AT_RUNG,
    PRUNED_AT_TOKENS,
    REFERENCE,
    ROLE,
    ROLE_SEARCH,
    SCHEDULE,
    SEED,
    THROUGHPUT_RATIO,
    TOKENS_PER_S,
    WORKER,
    heads_attr,
)
from search.config import StudyConfig
from search.storage.records import FINISHED, readable

# the stored attrs an export writes as they are, in this order, after the objectives
EXPORTED_ATTRS = (
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


@dataclass(frozen=True)
class TrialRow:
    """One trial, decoded.

    Attributes:
        number: the Optuna trial number.
        state: COMPLETE, PRUNED, FAIL, RUNNING or WAITING.
        role: baseline, reference, search, confirm or race.
        schedule: its head schedule (None for a trial that never got one); `heads` per layer.
        seed: the seed of its initial weights, data order and validation batches.
        values: each objective's final value as told (None where it has none: pruned, failed or running).
        feasible: whether it meets search.min_throughput_ratio.
        val_loss: the objective of a COMPLETE trial, else the last value it reported (None: none yet).
        attrs: every stored user attr, as stored.
    """

    number: int
    state: str
    val_loss: float | None
    tokens_per_s: float | None
    schedule: str | None
    heads: tuple[int, ...] | None
    role: str
    seed: int | None
    curve: tuple[tuple[float, float], ...]  # (training tokens, val loss)
    pruned_at: int | None
    worker: str | None
    start: datetime | None
    complete: datetime | None
    error: str | None
    values: dict[str, float | None] = field(default_factory=dict)
    feasible: bool = True
    audit: list[dict] | None = None
    params: dict = field(default_factory=dict)
    attrs: dict = field(default_factory=dict)
    throughput: float | None = None  # tokens/s over uniform's, paired (the `throughput` objective)

    @classmethod
    def of(cls, t: FrozenTrial, metric_names: list[str], study_audit: dict | None = None) -> TrialRow:
        """The row of trial `t` of a study whose objectives are `metric_names`; `study_audit`: the study's stored
        audit when it audited this very trial (`run --prior auto`)."""
        attrs = t.user_attrs
        loss_i = _index(metric_names, "val_loss", 0)
        tps_i = _index(metric_names, "tokens_per_s", None)
        ratio_i = _index(metric_names, "throughput", None)
        curve = tuple(sorted((float(k), float(v)) for k, v in t.intermediate_values.items()))
        if not curve and attrs.get(CURVE):
            curve = tuple((float(a), float(b)) for a, b in attrs[CURVE])
        if t.values is not None and t.state == TrialState.COMPLETE:
            val_loss = _finite(t.values[loss_i])
            tps = _finite(t.values[tps_i]) if tps_i is not None else _finite(attrs.get(TOKENS_PER_S))
            ratio = _finite(t.values[ratio_i]) if ratio_i is not None else _finite(attrs.get(THROUGHPUT_RATIO))
        else:
            val_loss = curve[-1][1] if curve else None
            tps, ratio = _finite(attrs.get(TOKENS_PER_S)), _finite(attrs.get(THROUGHPUT_RATIO))
        worker = attrs.get(WORKER)
        where = f"{worker.get('host', '?')}:{worker.get('pid', '?')} ({worker.get('device', '?')})" if isinstance(worker, dict) else None
        return cls(
            number=t.number,
            state=t.state.name,
            val_loss=val_loss,
            tokens_per_s=tps,
            schedule=attrs.get(SCHEDULE),
            heads=_heads(attrs),
            role=attrs.get(ROLE, ROLE_SEARCH),
            seed=attrs.get(SEED),
            curve=curve,
            pruned_at=attrs.get(PRUNED_AT_TOKENS),
            worker=where,
            start=t.datetime_start,
            complete=t.datetime_complete,
            error=attrs.get(ERROR),
            values=dict(zip(metric_names, t.values or [None] * len(metric_names))),
            feasible=is_feasible(t),
            audit=_audit(attrs, study_audit),
            params=dict(t.params),
            attrs=attrs,
            throughput=ratio,
        )

    def columns(self, n_layer: int) -> dict:
        """The export's flat row: number, state, each objective, the stored attrs of EXPORTED_ATTRS as stored,
        feasible, then one column per layer's head count."""
        row: dict = {"number": self.number, "state": self.state, **self.values}
        row |= {key: self.attrs.get(key) for key in EXPORTED_ATTRS}
        row["feasible"] = self.feasible
        return row | {f"layer_{i:02d}": self.attrs.get(heads_attr(i)) for i in range(n_layer)}


def finished_rows(study: optuna.Study, config: StudyConfig) -> list[TrialRow]:
    """Every finished trial of `study` (whose config is `config`), oldest first; a trial whose attrs cannot be read is
    left out (`status` names it)."""
    names = list(config.search.objectives)
    return [TrialRow.of(t, names) for t in readable(study.get_trials(deepcopy=False, states=FINISHED))[0]]


def _index(names: list[str], name: str, default: int | None) -> int | None:
    return names.index(name) if name in names else default


def _heads(attrs: dict) -> tuple[int, ...] | None:
    layer_keys = sorted(k for k in attrs if k.startswith(HEADS_PREFIX) and k[len(HEADS_PREFIX) :].isdigit())
    if layer_keys:
        return tuple(int(attrs[k]) for k in layer_keys)
    try:
        return Schedule.parse(attrs[SCHEDULE]).heads if SCHEDULE in attrs else None
    except ScheduleError:
        return None


def _audit(attrs: dict, study_audit: dict | None = None) -> list[dict] | None:
    """A trial's own audit, else the study's when `prism-search run --prior auto` audited this very trial
    (its profile is stored on the study, JSON, with `source` = "STUDY:TRIAL" and per-layer rows per probe set)."""
    audit = attrs.get(ATTR_AUDIT, study_audit)
    if isinstance(audit, str):
        audit = json.loads(audit)
    if isinstance(audit, dict):
        audit = audit.get("layers")
        if isinstance(audit, dict):  # rows per probe set: the first set is the corpus windows
            audit = next(iter(audit.values()), None)
    return audit if isinstance(audit, list) and audit and all(isinstance(a, dict) for a in audit) else None


def _finite(x) -> float | None:
    return float(x) if isinstance(x, (int, float)) and math.isfinite(x) else None
