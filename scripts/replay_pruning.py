"""Replay `min_resource_evals = "auto"` on the committed benchmark studies: would it ever have cut the best schedule?

    .venv/bin/python scripts/replay_pruning.py                     # docs/results/bench.db: bench-main, -long, -width

Each study's trained runs are replayed in trial order, one at a time, as a one-worker search would have run them.
Before each run the gate's start is estimated from the runs finished so far (their full curves, as the product does
when a trial completes); from that start on, successive halving (Optuna's rule: keep the best 1/eta of the runs that
reached the rung) may cut the run at each rung, and a cut run ends there: its curve never feeds a later estimate.
Reported per study: where pruning started, the runs cut, whether the best schedule by paired mean (on the whole
study) lost a run, and the training tokens spent against no pruning.
"""

from __future__ import annotations

import argparse

import optuna
from optuna.trial import FrozenTrial, TrialState

from search.analysis.blocked import many_to_one
from search.analysis.summary import auto_pruning_start, best_by_mean, study_runs
from search.attrs import DUPLICATE_ATTR, SCHEDULE
from search.storage.records import stored_config
from search.study.pruning import budget_tokens, promotable

STUDIES = ("bench-main", "bench-long", "bench-width")


def replay(study: optuna.Study) -> str:
    config = stored_config(study)
    config = config.model_copy(update={"search": config.search.model_copy(update={"min_resource_evals": "auto"})})
    eta = config.search.reduction_factor
    _, full = budget_tokens(config)
    runs = [
        t
        for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        if DUPLICATE_ATTR not in t.user_attrs and t.intermediate_values
    ]
    best = best_by_mean(many_to_one(study_runs(runs, config), str(config.baseline)), str(config.baseline))
    finished: list[FrozenTrial] = []  # what the gate has seen: runs that were not cut
    at_rung: dict[int, list[float]] = {}
    spent, cuts, best_cut, starts = 0, [], False, []
    for t in sorted(runs, key=lambda t: t.number):
        start = auto_pruning_start(finished, config)
        starts.append(start)
        cut_at = None
        for tokens, loss in sorted(t.intermediate_values.items()):
            if tokens >= full:
                break
            others = at_rung.setdefault(tokens, [])
            keep = start is None or tokens < start or promotable(loss, list(others), eta)
            others.append(loss)
            if not keep:
                cut_at = tokens
                break
        if cut_at is None:
            spent += full
            finished.append(t)
        else:
            spent += cut_at
            cuts.append(f"`{t.user_attrs[SCHEDULE]}` seed {t.user_attrs.get('seed')} at {cut_at:,}")
            best_cut |= t.user_attrs[SCHEDULE] == best
    first = next((s for s in starts if s is not None), None)
    where = f"from {first:,} tokens ({first / full:.0%})" if first is not None else "never (no rung ranked reliably)"
    return (
        f"| {study.study_name} | {len(runs)} | {where} | {len(cuts)} | `{best}` {'**cut**' if best_cut else 'never cut'} "
        f"| {spent / 1e6:.1f} M of {len(runs) * full / 1e6:.1f} M ({1 - spent / (len(runs) * full):.1%} saved) |"
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--db", default="docs/results/bench.db")
    args = p.parse_args()
    storage = optuna.storages.RDBStorage(f"sqlite:///{args.db}")
    print("| study | runs | pruning started | runs cut | best by mean | training tokens (vs no pruning) |")
    print("|---|---:|---|---:|---|---|")
    for name in STUDIES:
        print(replay(optuna.load_study(study_name=name, storage=storage)))


if __name__ == "__main__":
    main()
