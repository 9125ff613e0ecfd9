"""Geometry-derived priors: audit a model's layers, map the profile to schedules, seed a study with them."""

from search.priors.audit import AuditError, audit_model, load_source, read_profile, write_report
from search.priors.mapping import RankedSchedule, ideal_schedule, onset_and_late, rank_schedules
from search.priors.seeding import (
    ATTR_AUDIT,
    ATTR_PRIOR,
    PriorError,
    PriorSampler,
    keeping_checkpoints,
    make_prior,
    narrow_sampler,
    prior_from_baseline,
    read_prior,
    seed_study,
)
from search.priors.zones import Zone, detect_zones

__all__ = [
    "ATTR_AUDIT",
    "ATTR_PRIOR",
    "AuditError",
    "PriorError",
    "PriorSampler",
    "RankedSchedule",
    "Zone",
    "audit_model",
    "keeping_checkpoints",
    "detect_zones",
    "ideal_schedule",
    "load_source",
    "make_prior",
    "narrow_sampler",
    "onset_and_late",
    "prior_from_baseline",
    "rank_schedules",
    "read_prior",
    "read_profile",
    "seed_study",
    "write_report",
]
