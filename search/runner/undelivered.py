"""Results that finished while the database was unreachable: kept in a local file until they can be stored.

A trial's result is never dropped silently. When the driver gives up on the database it appends the result to
`prism-search-undelivered-<study>.jsonl` in the working directory; `resume` stores every result whose trial
is still RUNNING in the database (the result wins over the stale-heartbeat recovery) and removes the file.
"""

from __future__ import annotations

import json
from pathlib import Path

import optuna
from optuna.trial import TrialState

from search.attrs import CURVE, PRUNED_AT_TOKENS, TOKENS
from search.storage import storage_of, trial_id


def undelivered_path(study_name: str) -> Path:
    return Path.cwd() / f"prism-search-undelivered-{study_name}.jsonl"


def save_undelivered(study_name: str, number: int, state: TrialState, values: list[float], attrs: dict) -> Path:
    path = undelivered_path(study_name)
    with path.open("a") as f:
        f.write(json.dumps({"number": number, "state": state.name, "values": values, "attrs": attrs}) + "\n")
    return path


def deliver_undelivered(study: optuna.Study) -> list[int]:
    """Store kept results whose trials are still RUNNING; returns their numbers."""
    path = undelivered_path(study.study_name)
    if not path.exists():
        return []
    running = {t.number: t for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))}
    delivered = []
    for line in path.read_text().splitlines():
        record = json.loads(line)
        trial = running.get(record["number"])
        if trial is None:
            continue
        storage, attrs, tid = storage_of(study), record["attrs"], trial_id(trial)
        for key, value in attrs.items():
            storage.set_trial_user_attr(tid, key, value)
        for tokens, loss in attrs[CURVE]:
            if tokens not in trial.intermediate_values:
                storage.set_trial_intermediate_value(tid, tokens, loss)
        if record["state"] == "PRUNED":
            storage.set_trial_user_attr(tid, PRUNED_AT_TOKENS, attrs[TOKENS])
            study.tell(trial.number, state=TrialState.PRUNED)
        else:
            study.tell(trial.number, record["values"])
        delivered.append(trial.number)
    path.unlink()
    return delivered
