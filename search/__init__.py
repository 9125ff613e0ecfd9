"""search: the prism-search service — schedule spaces, studies, the Ray driver, storage and the CLI."""

from search.config import ConfigError, PrismSearchError, StudyConfig, load_config, parse_config
from search.families import FAMILIES, FreeFamily, RampFamily, RampLateFamily, ScheduleFamily, UniformFamily, make_family
from search.runner.driver import Driver, connect_ray, requeue_stale_trials
from search.samplers import ScheduleGridSampler, make_sampler
from search.storage import mask_url, open_storage
from search.study import Summary, load_study, open_study, summarize
from search.runner.worker import TrialSession, TrialSpec, run_trial, throughput_ratio

__all__ = [
    "FAMILIES",
    "ConfigError",
    "Driver",
    "FreeFamily",
    "PrismSearchError",
    "RampFamily",
    "RampLateFamily",
    "ScheduleGridSampler",
    "ScheduleFamily",
    "StudyConfig",
    "Summary",
    "TrialSession",
    "TrialSpec",
    "UniformFamily",
    "connect_ray",
    "load_config",
    "load_study",
    "make_family",
    "make_sampler",
    "mask_url",
    "open_storage",
    "open_study",
    "parse_config",
    "requeue_stale_trials",
    "run_trial",
    "summarize",
    "throughput_ratio",
]
