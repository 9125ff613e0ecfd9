"""The `prior` file: a geometry profile mapped onto a study's family as ranked schedules, and reading one back.

Seeding a study with it is the study's business (search.study._lifecycle); priors only rank and measure.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

from pydantic import TypeAdapter

from prism import Schedule, ScheduleError, validate
from search.config import StudyConfig
from search.errors import PriorError
from search.families import ScheduleFamily
from search.outputs import check_output, jsonout, write_output
from search.priors._files import read_versioned_json, typed
from search.priors.mapping import RankedSchedule, onset_and_late, rank_schedules
from search.priors.profile import Profile, read_profile
from search.priors.zones import Zone

PRIOR_FORMAT = "prism-prior/1"


@dataclass(frozen=True)
class Prior:
    """A profile mapped onto one study's family (the prior file, and what a seeded study stores): its ranked
    schedules, and the integration onset and late zone they were read from (None: not found)."""

    n_layer: int
    schedules: list[RankedSchedule]  # best first
    study: str = ""  # what it was mapped for: the study, its family and its uniform baseline
    family: str = ""
    baseline: str = ""
    source: str = ""  # the audited model
    onset: Zone | None = None
    late: Zone | None = None
    format: str = PRIOR_FORMAT
    # a seeded study's: proposals before trial number `narrow_until` are drawn near the schedules with this chance
    narrow_until: int | None = None
    strength: float | None = None

    def to_dict(self) -> dict:
        """Its JSON: a prior file's fields, and a seeded study's two more."""
        return {k: v for k, v in asdict(self).items() if v is not None or k in ("onset", "late")}

    @classmethod
    def of(cls, data: dict, where: str) -> Prior:
        """A prior from its JSON; one line naming the first malformed field (`where`: the file or the study)."""
        return typed(_PRIOR, data, where, "prior", "write the prior again with `prism-search prior`", PriorError)


def make_prior(profile: Profile, config: StudyConfig, family: ScheduleFamily, top_k: int = 4) -> Prior:
    """Map a profile onto the study's family (`family`, the one `config` declares: StudyConfig.family; see
    search.priors.mapping)."""
    if profile.n_layer != config.model.n_layer:
        raise PriorError(
            f"the profile is of a {profile.n_layer}-layer model, the study {config.name!r} has "
            f"model.n_layer={config.model.n_layer}; audit a model of the study's depth"
        )
    ranked = rank_schedules(family, config.baseline.heads[0], profile.zones, top_k)
    onset, late = onset_and_late(profile.zones)
    return Prior(
        study=config.name,
        family=config.space.family,
        n_layer=config.model.n_layer,
        baseline=str(config.baseline),
        schedules=ranked,
        source=profile.source,
        onset=onset,
        late=late,
    )


def write_prior(profile_file: str, config: StudyConfig, top_k: int, output: str) -> Prior:
    """`prior PROFILE STUDY.toml`: map the profile `audit` wrote onto the study's family and write the prior file
    (`output`, checked before anything is read); returns the prior."""
    check_output(output, "-o", ".json")
    prior = make_prior(read_profile(profile_file), config, config.family, top_k)
    write_output(output, jsonout.dumps(prior.to_dict(), indent=1), "-o", ".json")
    return prior


_PRIOR = TypeAdapter(Prior)


def read_prior(path: str | Path, config: StudyConfig) -> Prior:
    """A prior file checked against the study: its format, fields, depth and every schedule's validity."""
    made_by = "`prism-search prior PROFILE.json STUDY.toml -o PRIOR.json` (or use --prior auto)"
    prior = Prior.of(read_versioned_json(path, PRIOR_FORMAT, "prior", made_by, PriorError), str(path))
    if prior.n_layer != config.model.n_layer:
        raise PriorError(
            f"{path} is for {prior.n_layer} layers, the study has model.n_layer={config.model.n_layer}; map a profile of the study's depth"
        )
    for entry in prior.schedules:
        try:
            validate(Schedule.parse(entry.schedule, config.model.n_layer), config.model_config_)
        except ScheduleError as e:
            raise PriorError(f"{path}: prior schedule {entry.schedule!r} does not fit the study ({e})") from None
    return prior
