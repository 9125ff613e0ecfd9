"""search: the prism-search service. `Study` is the way in; the CLI (`prism-search`) is a thin layer over it.

    >>> from search import Study
    >>> study = Study.create("studies/tiny.toml", storage="sqlite:///:memory:")
    >>> str(study.config.baseline), study.config.family.size()  # uniform baseline, ramp schedules
    ('1x3', 10)

Each public name loads its module on first use (PEP 562): `import search` costs nothing, and only the methods that
train import Ray and torch.
"""

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # what type checkers read; at run time __getattr__ below imports each name on first use
    from search.analysis.rows import TrialRow
    from search.analysis.summary import ConfirmationRow, Summary
    from search.analysis.verdict import Verdict
    from search.config import StudyConfig, load_config
    from search.errors import ConfigError, PrismSearchError, StudyInterrupted
    from search.families import FAMILIES, FreeFamily, RampFamily, RampLateFamily, ScheduleFamily, UniformFamily, make_family
    from search.runner.progress import LogProgress, StudyProgress
    from search.study.policy import Standing
    from search.study.study import Study
    from search.text import verdict_text

_EXPORTS = {
    "search.study.study": ("Study",),
    "search.analysis.rows": ("TrialRow",),
    "search.study.policy": ("Standing",),
    "search.runner.progress": ("LogProgress", "StudyProgress"),
    "search.config": ("StudyConfig", "load_config"),
    "search.analysis.summary": ("ConfirmationRow", "Summary"),
    "search.analysis.verdict": ("Verdict",),
    "search.text": ("verdict_text",),  # the verdict's line, as `status` prints it
    "search.errors": ("ConfigError", "PrismSearchError", "StudyInterrupted"),
    "search.families": (
        "FAMILIES",
        "FreeFamily",
        "RampFamily",
        "RampLateFamily",
        "ScheduleFamily",
        "UniformFamily",
        "make_family",
    ),
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
