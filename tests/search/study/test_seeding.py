"""Seeding a study with a prior (search.study.lifecycle): the queue, the stored prior, the narrowing sampler."""

import json

import optuna
import pytest

from prism import Schedule
from search.attrs import ATTR_AUDIT, ATTR_PRIOR
from search.priors import make_prior
from search.study._lifecycle import narrow_sampler, seed_study
from search.study.create import open_study
from search.study.samplers import PriorSampler
from tests.search.test_priors import _profile


def _context(config):
    return open_study(config, optuna.storages.InMemoryStorage(), fingerprint="test")


def test_seeding_enqueues_prior_schedules_once_and_stores_prior_and_profile(tiny_config):
    profile = _profile(3, [1])
    prior = make_prior(profile, tiny_config, tiny_config.family)
    ctx = _context(tiny_config)
    study = ctx.study
    added = seed_study(ctx, prior, profile)
    waiting = [t for t in study.get_trials() if t.state == optuna.trial.TrialState.WAITING]
    assert str(tiny_config.baseline) not in added  # already queued as the baseline
    assert [t.user_attrs["schedule"] for t in waiting if t.user_attrs.get("source") == "prior"] == added
    assert all(t.user_attrs["role"] == "search" for t in waiting if t.user_attrs.get("source") == "prior")
    assert json.loads(study.user_attrs[ATTR_AUDIT])["zones"] == profile.to_dict()["zones"]
    assert json.loads(study.user_attrs[ATTR_PRIOR])["narrow_until"] == len(waiting) + tiny_config.search.n_startup_trials
    assert seed_study(ctx, prior, profile) == []  # resume: nothing queued twice
    # the queue hands out the baselines first, then the prior schedules in rank order
    family = tiny_config.family
    order = []
    for _ in waiting:
        trial = study.ask()
        order.append(str(family.suggest(trial)))
        study.tell(trial, 1.0)
    assert order[len(order) - len(added) :] == added


@pytest.mark.parametrize("strength", [1.0, 0.0])
def test_narrowing_draws_early_proposals_near_the_priors(tiny_config, strength):
    config = tiny_config.model_copy(
        update={"search": tiny_config.search.model_copy(update={"prior_strength": strength, "n_startup_trials": 40, "baseline_seeds": 1})}
    )
    config = config.model_copy(update={"model": config.model.model_copy(update={"n_layer": 8})})
    family = config.family
    prior = make_prior(_profile(8, [5]), config, family, top_k=1)
    ctx = _context(config)
    study = ctx.study
    seed_study(ctx, prior)
    narrow_sampler(ctx)
    assert isinstance(study.sampler.base, PriorSampler)  # inside the distinct proposals (search.study.samplers)
    anchor = family.params_for(Schedule.parse(prior.schedules[0].schedule))
    offsets = []
    for _ in range(40):
        trial = study.ask()
        family.suggest(trial)
        if "role" not in trial.user_attrs:  # proposed by the sampler, not queued
            offsets += [abs(trial.params[k] - v) for k, v in anchor.items()]
        study.tell(trial, 1.0)
    assert len(offsets) >= 60
    if strength == 1.0:
        assert max(offsets) <= 1
    else:
        assert max(offsets) > 1  # the study's own sampler ranges over the whole space
