"""Creating and opening studies: everything needed to resume is stored at creation.

A study stores its full validated config and its corpus fingerprint (search.storage.records), so `resume NAME`
needs no TOML and refuses a corpus that changed. The uniform baseline is enqueued first, once per
`baseline_seeds`; the first baseline uses the study seed like every search trial, so its gap to any schedule
is a paired comparison (search.storage.summary).
"""

from __future__ import annotations

import optuna

from search.attrs import ATTR_CONFIG, ATTR_FINGERPRINT, ROLE_BASELINE, ROLE_REFERENCE
from search.config import OBJECTIVES, PrismSearchError, StudyConfig, family_for, references_for
from search.storage.records import enqueue, find_study, stored_config
from search.study.pruning import make_pruner
from search.study.samplers import make_sampler


def _comparable(config: StudyConfig) -> dict:
    """The parts of a config that must not change over a study's life (trial count, storage, workers may)."""
    return config.model_dump(exclude={"n_trials", "storage", "resources", "keep_checkpoints", "checkpoint_dir"})


def load_study(name: str, storage: optuna.storages.BaseStorage) -> optuna.Study:
    config = stored_config(find_study(name, storage))
    return optuna.load_study(study_name=name, storage=storage, sampler=make_sampler(config), pruner=make_pruner(config))


def open_study(config: StudyConfig, storage: optuna.storages.BaseStorage, fingerprint: str) -> optuna.Study:
    """Create the study (baseline and references enqueued) or reopen it after checking nothing drifted."""
    study = optuna.create_study(
        study_name=config.name,
        storage=storage,
        load_if_exists=True,
        directions=[OBJECTIVES[o] for o in config.search.objectives],
        sampler=make_sampler(config),
        pruner=make_pruner(config),
    )
    if ATTR_CONFIG in study.user_attrs:
        previous = stored_config(study)
        if _comparable(previous) != _comparable(config):
            raise PrismSearchError(
                f"study {config.name!r} exists with a different model/space/train/data/search config; "
                f"use `prism-search resume {config.name}` or give the study a new name"
            )
        if study.user_attrs.get(ATTR_FINGERPRINT) != fingerprint:
            raise PrismSearchError(
                f"study {config.name!r} was trained on a corpus with fingerprint "
                f"{study.user_attrs.get(ATTR_FINGERPRINT)}, this one has {fingerprint}; use a new study name"
            )
        study.set_user_attr(ATTR_CONFIG, config.model_dump_json())  # n_trials and resources may change
        return study
    study.set_user_attr(ATTR_CONFIG, config.model_dump_json())
    study.set_user_attr(ATTR_FINGERPRINT, fingerprint)
    study.set_metric_names(list(config.search.objectives))
    family = family_for(config)
    seeds = [config.seed + k for k in range(config.search.baseline_seeds)]
    for seed in seeds:
        enqueue(study, family, config.baseline, role=ROLE_BASELINE, seed=seed)
    for seed in seeds:  # a reference runs at every baseline seed: its gap to uniform is paired on all of them
        for ref in references_for(config):
            enqueue(study, family, ref.schedule, role=ROLE_REFERENCE, seed=seed, reference=ref.name)
    return study
