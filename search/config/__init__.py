"""Study configuration: one TOML file, validated once at the edge into typed pydantic models.

Every error becomes a `ConfigError` whose one-line message names the field and the fix; nothing downstream
(storage, Ray, torch) is touched before the config is valid. `schema` holds the sections, `loading` reads a file or
a stored study's JSON with the command line's flags on top, `wording` writes the one-line errors.
"""

from search.config.loading import (
    SEARCH_EARLIER_DEFAULTS,
    Flags,
    check_in_effect,
    load_config,
    parse_config,
    read_toml,
    storage_or_default,
)
from search.config.schema import (
    DEFAULT_STORAGE,
    GRID_LIMIT,
    MAX_SEEDS,
    MIN_LOOK,
    OBJECTIVES,
    STORAGE_ENV,
    TRACKING_DEFAULTS,
    DataSection,
    ExperimentSection,
    ModelSection,
    Objective,
    ResourcesSection,
    SearchSection,
    SpaceSection,
    StudyConfig,
    TrackingSection,
    TrainSection,
    default_baseline_heads,
    references_for,
)
from search.config.wording import resume_command

__all__ = [
    "DEFAULT_STORAGE",
    "GRID_LIMIT",
    "MAX_SEEDS",
    "MIN_LOOK",
    "OBJECTIVES",
    "SEARCH_EARLIER_DEFAULTS",
    "STORAGE_ENV",
    "TRACKING_DEFAULTS",
    "DataSection",
    "ExperimentSection",
    "Flags",
    "ModelSection",
    "Objective",
    "ResourcesSection",
    "SearchSection",
    "SpaceSection",
    "StudyConfig",
    "TrackingSection",
    "TrainSection",
    "check_in_effect",
    "default_baseline_heads",
    "load_config",
    "parse_config",
    "read_toml",
    "references_for",
    "resume_command",
    "storage_or_default",
]
