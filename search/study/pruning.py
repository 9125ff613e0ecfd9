"""How a running trial is judged at each evaluation: Optuna's pruner (made here), or rung-based successive halving.

Single-objective studies report every evaluation to Optuna and ask its pruner (budgets in training tokens).
Multi-objective trials cannot report or prune in Optuna (`NotImplementedError`), so `RungStopping` does
successive halving itself: rung k sits at min_resource * eta^k tokens; the val loss a trial has at its first
evaluation past a rung is stored as user attr `rung_<k>`, and a trial goes on only while it is in the best
1/eta of all trials that reached that rung (the best one while fewer than eta have: Optuna's rule). A stopped
trial ends PRUNED with `pruned_at_rung`. Rung values live in the database, so any driver sees them.

`min_resource_evals = "auto"` puts a gate in front of either: no trial is stopped before the first rung from which
the study's own complete curves rank schedules reliably within seeds (search.analysis.summary.auto_pruning_start),
re-estimated whenever another trial has completed; until such a rung exists, every trial runs to the end.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import optuna

from search.analysis.summary import auto_pruning_start
from search.attrs import PRUNED_AT_RUNG, rung_attr
from search.config import StudyConfig
from search.runner.context import StudyContext

if TYPE_CHECKING:
    from prism import EvalPoint


def tokens_per_eval(config: StudyConfig) -> int:
    return config.train.eval_every * config.train.batch_size * config.model.block_size


def budget_tokens(config: StudyConfig) -> tuple[int, int]:
    """(min_resource, max_resource) in training tokens: the first rung and the full training budget ("auto": rungs
    from the first evaluation, gated by `ReliableRungGate`)."""
    full = config.train.steps * config.train.batch_size * config.model.block_size
    evals = 1 if config.search.min_resource_evals == "auto" else config.search.min_resource_evals
    return evals * tokens_per_eval(config), full


class ReliableRungGate:
    """Whether pruning may act at a given number of training tokens in this study (`min_resource_evals = "auto"`);
    the start is re-read from the stored trials only when the number of complete trials has changed."""

    def __init__(self, config: StudyConfig):
        self.config = config
        self._seen = -1
        self._start: int | None = None

    def start(self, study: optuna.Study) -> int | None:
        trials = study.get_trials(deepcopy=False)
        complete = sum(t.state == optuna.trial.TrialState.COMPLETE for t in trials)
        if complete != self._seen:
            self._seen, self._start = complete, auto_pruning_start(trials, self.config)
        return self._start

    def allows(self, study: optuna.Study, tokens: int) -> bool:
        start = self.start(study)
        return start is not None and tokens >= start


class _GatedPruner(optuna.pruners.BasePruner):
    """Optuna's pruner, asked at every report (its rung bookkeeping stays complete), obeyed only past the gate."""

    def __init__(self, inner: optuna.pruners.BasePruner, gate: ReliableRungGate):
        self.inner = inner
        self.gate = gate

    def prune(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> bool:
        step = trial.last_step
        return self.inner.prune(study, trial) and step is not None and self.gate.allows(study, step)


def rungs(config: StudyConfig) -> list[int]:
    """Rung budgets in tokens below the full budget: min_resource * eta^k."""
    first, full = budget_tokens(config)
    eta = config.search.reduction_factor
    return [first * eta**k for k in range(max(0, math.ceil(math.log(full / first, eta))))] if first < full else []


class OptunaPruning:
    """Single objective: report to Optuna, let the study's pruner decide."""

    def report(self, trial: optuna.Trial, point: EvalPoint) -> None:
        trial.report(point.val_loss, point.tokens)

    def should_stop(self, trial: optuna.Trial, point: EvalPoint) -> bool:
        return trial.should_prune()


class RungStopping:
    """Multi objective: successive halving on val loss at token rungs, recorded in user attrs."""

    def __init__(self, study: optuna.Study, config: StudyConfig):
        self.study = study
        self.rungs = rungs(config) if config.search.pruner == "successive-halving" else []
        self.eta = config.search.reduction_factor
        self.gate = ReliableRungGate(config) if config.search.min_resource_evals == "auto" else None
        self._fresh: dict[int, int] = {}  # trial number -> rung its latest evaluation reached

    def report(self, trial: optuna.Trial, point: EvalPoint) -> None:
        passed = [k for k, r in enumerate(self.rungs) if point.tokens >= r and rung_attr(k) not in trial.user_attrs]
        if passed:  # a trial's value at a rung is its first evaluation at or past the rung's budget
            trial.set_user_attr(rung_attr(passed[-1]), point.val_loss)
            self._fresh[trial.number] = passed[-1]

    def should_stop(self, trial: optuna.Trial, point: EvalPoint) -> bool:
        k = self._fresh.pop(trial.number, None)
        if k is None:
            return False
        key = rung_attr(k)
        others = [t.user_attrs[key] for t in self.study.get_trials(deepcopy=False) if key in t.user_attrs and t.number != trial.number]
        if promotable(trial.user_attrs[key], others, self.eta) or (self.gate and not self.gate.allows(self.study, point.tokens)):
            return False
        trial.set_user_attr(PRUNED_AT_RUNG, k)
        return True


def promotable(value: float, others: list[float], eta: int) -> bool:
    """Optuna's successive-halving rule: in the best len/eta of everyone at the rung (self included); the best
    one while fewer than eta trials have reached it, since a trial can't wait for later competitors."""
    competing = sorted([*others, value])
    index = max(0, len(competing) // eta - 1)
    return value <= competing[index]


def make_stopping(ctx: StudyContext) -> OptunaPruning | RungStopping:
    return RungStopping(ctx.study, ctx.config) if len(ctx.config.search.objectives) > 1 else OptunaPruning()


def make_pruner(config: StudyConfig) -> optuna.pruners.BasePruner:
    """Pruner budgets are in training tokens, the unit every trial reports its intermediate values in.
    Multi-objective studies get no Optuna pruner: `RungStopping` stops their trials."""
    min_resource, max_resource = budget_tokens(config)
    factor = config.search.reduction_factor
    pruner: optuna.pruners.BasePruner
    match config.search.pruner if len(config.search.objectives) == 1 else "none":
        case "hyperband":
            pruner = optuna.pruners.HyperbandPruner(min_resource=min_resource, max_resource=max_resource, reduction_factor=factor)
        case "successive-halving":
            pruner = optuna.pruners.SuccessiveHalvingPruner(min_resource=min_resource, reduction_factor=factor)
        case "median":
            pruner = optuna.pruners.MedianPruner(n_startup_trials=config.search.n_startup_trials, n_warmup_steps=min_resource)
        case _:
            return optuna.pruners.NopPruner()
    return _GatedPruner(pruner, ReliableRungGate(config)) if config.search.min_resource_evals == "auto" else pruner
