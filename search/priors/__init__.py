"""Geometry-derived priors: audit a model's layers, map the profile to ranked schedules (the prior file).

Seeding a study with a prior is the study's (search.study._lifecycle): priors rank and measure, they never touch a study.
"""

from search.priors.audit import (
    audit_model,
    load_source,
    owned_checkpoint,
    trial_checkpoint,
    write_audit,
    write_report,
)
from search.priors.mapping import LATE_DEFAULT, ONSET_DEFAULT, RankedSchedule, ideal_schedule, onset_and_late, rank_schedules
from search.priors.prior_file import Prior, make_prior, read_prior, write_prior
from search.priors.profile import PROFILE_FORMAT, Profile, read_profile
from search.priors.zones import Zone, detect_zones

__all__ = [
    "LATE_DEFAULT",
    "ONSET_DEFAULT",
    "PROFILE_FORMAT",
    "Prior",
    "Profile",
    "RankedSchedule",
    "Zone",
    "audit_model",
    "detect_zones",
    "ideal_schedule",
    "load_source",
    "make_prior",
    "onset_and_late",
    "owned_checkpoint",
    "rank_schedules",
    "read_prior",
    "read_profile",
    "trial_checkpoint",
    "write_audit",
    "write_prior",
    "write_report",
]
