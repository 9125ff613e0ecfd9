"""The study: what to search and in which order. Creates and opens studies, samples and prunes, drives a study's
life (run, resume, seed with a prior, confirm) through the runner, and exports it.

Arrows: the CLI calls the study; the study calls the schedule space, the runner, the storage and the priors.
Importing this package loads neither Ray nor torch: the functions that train import them.
"""

from search.study.confirmation import run_confirmation, top_schedules
from search.study.create import load_study, open_study
from search.study.export import render
from search.study.lifecycle import confirm, execute, narrow_sampler, prior_from_baseline, seed_study
from search.study.pruning import OptunaPruning, RungStopping, make_pruner, make_stopping
from search.study.samplers import PriorSampler, ScheduleGridSampler, make_sampler

__all__ = [
    "OptunaPruning",
    "PriorSampler",
    "RungStopping",
    "ScheduleGridSampler",
    "confirm",
    "execute",
    "load_study",
    "make_pruner",
    "make_sampler",
    "make_stopping",
    "narrow_sampler",
    "open_study",
    "prior_from_baseline",
    "render",
    "run_confirmation",
    "seed_study",
    "top_schedules",
]
