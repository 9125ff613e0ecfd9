"""search: the prism-search service — schedule spaces, studies, the Ray driver, storage and the CLI."""

from search.config import ConfigError, PrismSearchError, StudyConfig, load_config, parse_config
from search.families import FAMILIES, RampFamily, ScheduleFamily, UniformFamily, make_family
from search.runner import Driver, connect_ray, requeue_stale_trials
from search.storage import mask_url, open_storage
from search.study import Summary, load_study, open_study, summarize
from search.trial import TrialSession, TrialSpec, run_trial

__all__ = [
    "FAMILIES",
    "ConfigError",
    "Driver",
    "PrismSearchError",
    "RampFamily",
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
    "mask_url",
    "open_storage",
    "open_study",
    "parse_config",
    "requeue_stale_trials",
    "run_trial",
    "summarize",
]
