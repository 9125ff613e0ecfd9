"""search: the prism-search service — schedule spaces, studies, the Ray driver, storage and the CLI.

Each public name loads its module on first use (PEP 562): `import search.config` or the dashboard must not pay
for Ray and torch, which only the runner needs.
"""

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # what type checkers read; at run time __getattr__ below imports each name on first use
    from search.analysis.summary import Summary, summarize
    from search.config import StudyConfig, load_config, parse_config
    from search.errors import ConfigError, PrismSearchError
    from search.families import FAMILIES, FreeFamily, RampFamily, RampLateFamily, ScheduleFamily, UniformFamily, make_family
    from search.runner.context import StudyContext
    from search.runner.driver import Driver, connect_ray, requeue_stale_trials
    from search.runner.worker import TrialSession, TrialSpec, run_trial, throughput_ratio
    from search.storage import open_storage
    from search.study.create import open_study, reopen_study
    from search.study.samplers import ScheduleGridSampler, make_sampler
    from search.urls import mask_url

_EXPORTS = {
    "search.config": ("StudyConfig", "load_config", "parse_config"),
    "search.errors": ("ConfigError", "PrismSearchError"),
    "search.families": (
        "FAMILIES",
        "FreeFamily",
        "RampFamily",
        "RampLateFamily",
        "ScheduleFamily",
        "UniformFamily",
        "make_family",
    ),
    "search.runner.context": ("StudyContext",),
    "search.runner.driver": ("Driver", "connect_ray", "requeue_stale_trials"),
    "search.runner.worker": ("TrialSession", "TrialSpec", "run_trial", "throughput_ratio"),
    "search.storage": ("open_storage",),
    "search.urls": ("mask_url",),
    "search.analysis.summary": ("Summary", "summarize"),
    "search.study.create": ("open_study", "reopen_study"),
    "search.study.samplers": ("ScheduleGridSampler", "make_sampler"),
}
_HOME = {name: module for module, names in _EXPORTS.items() for name in names}
__all__ = sorted(_HOME)


def __getattr__(name: str) -> object:
    if name not in _HOME:
        raise AttributeError(f"module 'search' has no attribute {name!r}")
    value = getattr(importlib.import_module(_HOME[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
