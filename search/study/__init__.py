"""The study: what to search and in which order. Creates and opens studies, samples and prunes, drives a study's
life (run, resume, seed with a prior, confirm) through the runner, exports it, and trains or analyzes one model of
a study's config outside any study (`train`, `analyze`).

Arrows: the CLI calls the study; the study calls the schedule space, the runner, the storage and the priors.
Importing this package loads neither Ray nor torch: the functions that train import them.
"""

from search.runner.progress import LogProgress, StudyProgress
from search.study.confirmation import run_confirmation, top_schedules
from search.study.create import open_study, reopen_study
from search.study.export import SCHEDULE_FORMATS, render, render_schedule
from search.study.failures import database_failure
from search.study.lifecycle import StudyInterrupted, confirm, execute, narrow_sampler, prior_from_baseline, seed_study
from search.study.planning import forecast_study
from search.study.policy import Standing, standing
from search.study.pruning import OptunaPruning, RungStopping, make_pruner, make_stopping
from search.study.samplers import PriorSampler, ScheduleGridSampler, make_sampler
from search.study.single import SingleRun, TrainOverrides, analyze, resolve, train_single
from search.study.study import Study, TrialRow

__all__ = [
    "SCHEDULE_FORMATS",
    "LogProgress",
    "OptunaPruning",
    "PriorSampler",
    "RungStopping",
    "ScheduleGridSampler",
    "SingleRun",
    "Standing",
    "Study",
    "StudyInterrupted",
    "StudyProgress",
    "TrainOverrides",
    "TrialRow",
    "analyze",
    "confirm",
    "database_failure",
    "execute",
    "forecast_study",
    "make_pruner",
    "make_sampler",
    "make_stopping",
    "narrow_sampler",
    "open_study",
    "prior_from_baseline",
    "render",
    "render_schedule",
    "reopen_study",
    "resolve",
    "run_confirmation",
    "seed_study",
    "standing",
    "top_schedules",
    "train_single",
]
