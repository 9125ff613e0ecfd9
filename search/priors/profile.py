"""The geometry profile `prism-search audit` writes: a model's per-layer curves on fixed probe texts and the
transition zones found in them. The `prior` command maps it (search.priors.prior_file); a study seeded from it
keeps it (user attr ATTR_AUDIT) for the dashboard.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

from pydantic import TypeAdapter

from search.errors import AuditError
from search.priors._files import read_versioned_json, typed
from search.priors.zones import Zone

PROFILE_FORMAT = "prism-profile/1"


@dataclass(frozen=True)
class Profile:
    """One audited model. `curves[probe set][metric]` and `layers[probe set]` (each layer's metrics) run over the
    layers, whose relative depths are `depths`; `zones`: strongest first."""

    n_layer: int
    zones: list[Zone]
    source: str = ""  # what was audited: STUDY:TRIAL, a checkpoint folder or a Hugging Face folder
    schedule: str = ""  # its head schedule
    d_model: int | None = None
    depths: list[float] = field(default_factory=list)
    probes: dict[str, str] = field(default_factory=dict)  # probe set -> what its texts are
    curves: dict[str, dict[str, list[float | None]]] = field(default_factory=dict)
    layers: dict[str, list[dict]] = field(default_factory=dict)  # prism.analysis.LayerMetrics, as dicts
    zone_method: str = ""
    kind: str | None = None  # how the source was loaded (`audit`)
    checkpoint: str | None = None  # the checkpoint a study's `--prior auto` audited
    format: str = PROFILE_FORMAT

    def to_dict(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v is not None}

    @classmethod
    def of(cls, data: dict, where: str) -> Profile:
        """A profile from its JSON; one line naming the first malformed field (`where`: its file)."""
        return typed(_PROFILE, data, where, "profile", "write the profile again with `prism-search audit`", AuditError)


_PROFILE = TypeAdapter(Profile)


def read_profile(path: str | Path) -> Profile:
    data = read_versioned_json(path, PROFILE_FORMAT, "profile", "`prism-search audit SOURCE -o PROFILE.json`", AuditError)
    return Profile.of(data, str(path))
