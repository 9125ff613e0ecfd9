"""What the dashboard knows about a study: plain rows decoded from Optuna trials, read through the storage API.

Every figure and page is a pure function of a `StudyView`, so they are tested without a server and the
report reuses them unchanged. Optional data shows up when present and is skipped when absent:
- a second objective `throughput` (the paired tokens/s ratio to uniform) or, in studies made before it, `tokens_per_s`;
  else the `throughput_ratio` and `tokens_per_s` trial attrs;
- a geometry audit stored as the trial user attr `prism.audit`: a list of per-layer dicts (the fields of
  `prism.analysis.LayerMetrics`, e.g. `{"layer": 0, "mad": 3.1, "matrix_entropy": 0.4, ...}`), or a dict
  holding that list under "layers".
"""

from __future__ import annotations

import hashlib
import importlib
import json
import math
import sys
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from types import ModuleType

import optuna
from optuna.trial import FrozenTrial, TrialState

from search.analysis.rows import TrialRow
from search.analysis.summary import Summary, is_paired_baseline, summarize
from search.attrs import (
    ATTR_AUDIT,
    ROLE_CONFIRM,
)
from search.config import StudyConfig
from search.errors import ConfigError, PrismSearchError, StudyUnreadable
from search.storage import scratch_study, trial_id
from search.storage.records import readable, stored_config
from search.study import Standing


def loss_key(row: TrialRow) -> float:
    """Sort key by val loss; a row without one (not evaluated yet) sorts last."""
    return math.inf if row.val_loss is None else row.val_loss


def speed_of(metric_names: list[str]) -> tuple[Callable[[TrialRow], float | None], str]:
    """The speed a study optimised: the paired ratio (objective `throughput`), else raw tokens/s (older studies, or
    none optimised); with the axis title that names it."""
    if "throughput" in metric_names:
        return (lambda row: row.throughput), "tokens/s over uniform's, paired (higher is better)"
    return (lambda row: row.tokens_per_s), "training tokens/s (higher is better)"


@dataclass
class StudyView:
    name: str
    rows: list[TrialRow]
    config: StudyConfig | None  # None for a plain Optuna study not created by prism-search
    summary: Summary | None
    standing: Standing | None  # where the study's policies stand (None with no prism-search config)
    metric_names: list[str]
    stamp: str  # changes whenever a trial starts, reports, finishes or fails: the page reloads on change
    config_error: str | None = None  # the stored prism-search config exists but this version cannot read it

    @property
    def counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for r in self.rows:
            counts[r.state] = counts.get(r.state, 0) + 1
        return counts

    @property
    def status(self) -> str:
        """running | finished | stopped (unfinished, nothing running: resume it)."""
        counts = self.counts
        if counts.get("RUNNING"):
            return "running"
        if self.summary is None:  # a plain Optuna study has no target
            return "finished"
        # n_trials counts trained trials (search.analysis.budget); a study a policy stopped (its space ran out) is done too
        stopped = self.standing is not None and self.standing.stopped is not None
        return "finished" if self.summary.trained >= self.summary.n_trials or stopped else "stopped"

    def row(self, number: int) -> TrialRow | None:
        if 0 <= number < len(self.rows) and self.rows[number].number == number:
            return self.rows[number]
        return next((r for r in self.rows if r.number == number), None)  # trials were left out before it

    @property
    def baseline(self) -> TrialRow | None:
        """The paired uniform baseline (search.analysis.summary decides which run that is, for `status` too)."""
        config = self.config
        if config is None:  # a plain Optuna study: no uniform baseline
            return None
        return next((r for r in self.rows if r.state == "COMPLETE" and is_paired_baseline(r.attrs, config)), None)

    def baseline_for(self, row: TrialRow) -> TrialRow | None:
        """The uniform run at this trial's seed (any role, e.g. a confirmation run), else the study's baseline."""
        if self.summary is None:  # a plain Optuna study: no uniform baseline
            return None
        uniform = self.summary.baseline_schedule
        same_seed = (r for r in self.rows if r.state == "COMPLETE" and r.schedule == uniform and r.seed == row.seed)
        return next(same_seed, self.baseline)

    @property
    def searched(self) -> list[TrialRow]:
        """COMPLETE trials that compete for "best": confirmation runs re-measure chosen schedules, they never rank."""
        return [r for r in self.rows if r.state == "COMPLETE" and r.val_loss is not None and r.role != ROLE_CONFIRM]


def same_budget_gap(row: TrialRow, baseline: TrialRow | None) -> tuple[float, float | None] | None:
    """(gap, tokens): this trial's val loss minus the baseline's at the same training tokens, for a trial stopped
    early too (the baseline's own evaluation there, never its final loss). tokens None: both at the full budget
    without a curve. None when the baseline has no evaluation at that token count."""
    if baseline is None or row.val_loss is None or baseline.val_loss is None:
        return None
    if row.state == "COMPLETE" and baseline.state == "COMPLETE":
        return row.val_loss - baseline.val_loss, row.curve[-1][0] if row.curve else None
    if not row.curve:
        return None
    tokens, loss = row.curve[-1]
    at = dict(baseline.curve).get(tokens)
    return (loss - at, tokens) if at is not None else None


def stamp(trials: list[FrozenTrial]) -> str:
    h = hashlib.blake2b(digest_size=8)
    for t in trials:
        h.update(f"{t.number}:{t.state.value}:{len(t.intermediate_values)}:{len(t.user_attrs)};".encode())
    return h.hexdigest()


def study_view(study: optuna.Study, row_cache: dict | None = None, change_stamp: str | None = None) -> StudyView:
    """`row_cache` (kept by a long-lived caller) reuses the rows of finished trials, which never change: with
    Optuna's cached storage the same FrozenTrial object comes back on every refresh. `change_stamp`: the stamp the
    caller read from the database before reading the trials (the dashboard's, see `Dashboard.stamp`); by default
    one made from the trials."""
    trials = study.get_trials(deepcopy=False)
    names = study.metric_names or ["val_loss"]
    study_audit = study.user_attrs.get(ATTR_AUDIT)
    if isinstance(study_audit, str):
        study_audit = json.loads(study_audit)
    audited = study_audit.get("source") if isinstance(study_audit, dict) else None
    cache = row_cache if row_cache is not None else {}

    def cached(t: FrozenTrial) -> TrialRow | None:
        hit = cache.get((study.study_name, trial_id(t)))
        return hit[1] if hit is not None and hit[0] is t else None

    # a finished trial with a cached row was checked when it was decoded, and cannot change since
    left_out = readable([t for t in trials if cached(t) is None])[1]
    read = [t for t in trials if t.number not in left_out], left_out
    rows = []
    for t in read[0]:  # a malformed trial is left out; the summary's warnings name it
        if (row := cached(t)) is not None:
            rows.append(row)
            continue
        rows.append(TrialRow.of(t, names, study_audit if audited == f"{study.study_name}:{t.number}" else None))
        if t.state.is_finished():
            cache[(study.study_name, trial_id(t))] = (t, rows[-1])
    config, config_error = None, None
    try:
        config = stored_config(study)
    except ConfigError as e:  # a config this version cannot read (another version's fields): show what Optuna has
        config_error = str(e)  # masked by the config loader
    except StudyUnreadable:
        raise  # a damaged config: the study's page says what is damaged
    except PrismSearchError:
        pass  # a plain Optuna study
    summary = summarize(study, config, read) if config is not None else None  # the config parsed once, above
    return StudyView(
        name=study.study_name,
        rows=rows,
        config=config,
        summary=summary,
        standing=Standing.of(read[0], config) if config is not None else None,
        metric_names=names,
        stamp=change_stamp or stamp(trials),
        config_error=config_error,
    )


# -- derived quantities ---------------------------------------------------------------------------------


MIN_TRIALS_FOR_IMPORTANCE = 10


def layer_importance(rows: list[TrialRow]) -> dict[int, float] | None:
    """PED-ANOVA importance of each layer's decoded head count (log2 heads) for val loss, normalised to 1.

    The raw encoding params (e.g. ramp switch depths) are not per-layer quantities, so importance is computed on
    an in-memory Optuna study holding the decoded counts. None when too few completed trials say anything.
    """
    return _importance(importance_points(rows))


def importance_points(rows: list[TrialRow]) -> tuple[tuple[tuple[int, ...], float], ...]:
    """(log2 heads per layer, val loss) of the completed trials importance is computed on (the deepest schedules)."""
    done = [r for r in rows if r.state == "COMPLETE" and r.val_loss is not None and r.heads]
    n_layer = max((len(r.heads or ()) for r in done), default=0)
    return tuple((tuple(int(math.log2(h)) for h in r.heads or ()), loss_key(r)) for r in done if len(r.heads or ()) == n_layer)


@lru_cache(maxsize=32)
def _importance(points: tuple[tuple[tuple[int, ...], float], ...]) -> dict[int, float] | None:
    """Cached on the completed trials themselves: a page refresh recomputes only after a trial completes."""
    if len(points) < MIN_TRIALS_FOR_IMPORTANCE:
        return None
    low, high = min(min(x) for x, _ in points), max(max(x) for x, _ in points)
    if low == high:
        return None  # every layer of every trial has the same count: nothing varies, nothing to explain
    dist = optuna.distributions.IntDistribution(low, high)
    names = [f"layer_{i:02d}" for i in range(len(points[0][0]))]
    distributions: dict[str, optuna.distributions.BaseDistribution] = dict.fromkeys(names, dist)
    # made directly, not by create_trial: its validation of every param of thousands of trials was most of this
    # panel's time, and these values lie in the distribution by construction
    trials = [
        FrozenTrial(
            number=i,
            state=TrialState.COMPLETE,
            value=loss,
            datetime_start=None,
            datetime_complete=None,
            params=dict(zip(names, x)),
            distributions=distributions,
            user_attrs={},
            system_attrs={},
            intermediate_values={},
            trial_id=i,
        )
        for i, (x, loss) in enumerate(points)
    ]
    scratch = scratch_study(trials, direction="minimize")
    importance = _optuna_importance()
    evaluator = importance.PedAnovaImportanceEvaluator(target_quantile=max(0.1, 2 / len(points)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "too few trials" style warnings: the caller shows a note instead
        importances = importance.get_param_importances(scratch, evaluator=evaluator)
    return {int(name.removeprefix("layer_")): value for name, value in sorted(importances.items())}


def _optuna_importance() -> ModuleType:
    """optuna.importance, imported without scikit-learn where nothing has loaded it yet. The package's __init__
    imports fANOVA's random forest from scikit-learn (0.7 s of CPU, a third of a fresh dashboard's first page of
    5,000 trials), which PED-ANOVA never uses: with scikit-learn marked absent for that one import (Python then
    refuses `import sklearn`), Optuna's optional-import guard leaves fANOVA unloaded. Only fANOVA in this
    process is affected, and it is never called here; `import sklearn` works as before once this returns (in
    that instant another thread's would fail: no thread of the dashboard or a report imports it)."""
    if "optuna.importance" in sys.modules or "sklearn" in sys.modules:
        return importlib.import_module("optuna.importance")
    with _IMPORTING:
        sys.modules["sklearn"] = None  # type: ignore[assignment]
        try:
            return importlib.import_module("optuna.importance")
        finally:
            del sys.modules["sklearn"]


_IMPORTING = threading.Lock()
