"""The study: what to search and in which order. `Study` is the way in: it creates and opens studies, runs, resumes
and confirms them (its private lifecycle drives the trials through the runner), forecasts and exports them; beside
it, one model of a study's config trained or measured outside any study (`SingleRun`, `ModelMetrics`).

The face lists nouns: each verb is a method of one of them. Arrows: the CLI and the dashboard call the study; the
study calls the schedule space, the runner, the storage and the priors. Importing this package loads neither Ray
nor torch: the methods that train import them.
"""

from search.errors import StudyInterrupted
from search.runner.progress import LogProgress, StudyProgress
from search.study.export import SCHEDULE_FORMATS
from search.study.failures import DatabaseFailure
from search.study.policy import Standing
from search.study.single import ModelMetrics, SingleRun, TrainOverrides
from search.study.study import Study

__all__ = [
    "SCHEDULE_FORMATS",
    "DatabaseFailure",
    "LogProgress",
    "ModelMetrics",
    "SingleRun",
    "Standing",
    "Study",
    "StudyInterrupted",
    "StudyProgress",
    "TrainOverrides",
]
