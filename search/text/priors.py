"""The words of `audit` and `prior` (search.priors): a model's transition zones, and the schedules a profile ranks,
with what each column of that ranking means (the rule: search/priors/mapping.py). The priors sit above this layer,
so their values come in as plain numbers and names."""

from __future__ import annotations

from collections.abc import Sequence

from search.text.sheet import Sheet


def audit_sheet(source: str, schedule: str, zones: Sequence[tuple[float, int, float, float, float]]) -> Sheet:
    """`zones`: each transition zone's depth, first layer, start, end and strength."""
    sheet = Sheet(f"transition zones of {source} ({schedule})", columns=("depth", "from layer", "span", "strength"))
    for depth, layer, start, end, strength in zones:
        sheet.add(f"{depth:.3f}", str(layer), f"{start:.2f}-{end:.2f}", f"{strength:.3f}")
    return sheet


def audit_files_text(profile: str, report: object) -> str:
    return f"profile: {profile}  report: {report}"


def prior_sheet(
    study: str,
    family: str,
    baseline: str,
    onset: tuple[float, int] | None,
    defaults: tuple[float, float],
    ranked: Sequence[tuple[int, str, str, float]],
) -> Sheet:
    """`onset`: the integration onset's depth and layer (None: not found); `defaults`: the onset's and the late
    zone's depths when none is found; `ranked`: each schedule's rank, schedule, variant and distance. Its notes say
    what each column means."""
    onset_default, late_default = defaults
    found = f"at depth {onset[0]:.3f} (layer {onset[1]})" if onset else f"not found: default depth {onset_default}"
    columns = _prior_columns(late_default)
    sheet = Sheet(
        f"prior for {study} ({family} family, baseline {baseline}); integration onset {found}",
        columns=tuple(column for column, _ in columns),
        notes=[f"{column}: {meaning}" for column, meaning in columns],
    )
    for rank, schedule, variant, distance in ranked:
        sheet.add(str(rank), schedule, variant, f"{distance:g}")
    return sheet


def _prior_columns(late_default: float) -> list[tuple[str, str]]:
    """The `prior` table's columns and what each means (the rule: search/priors/mapping.py)."""
    return [
        ("rank", "the order in which `run --prior` queues the schedules (most literal reading of the profile first)"),
        ("schedule", "a member of the study's family, head counts as HEADSxLAYERS"),
        (
            "variant",
            "the hypothesis (reading of the profile) it stands for; ideal: the widest heads first, reaching the baseline's head "
            "count at the integration onset (the strongest transition zone), one count higher from a late zone on if one was found; "
            f"other-late: the ideal without that late step (or with one at depth {late_default} when none was found); onset+1 / onset-1: "
            "the ramp completing one layer later / earlier; ',top+1': the same shape ending one head count above the baseline",
        ),
        (
            "distance",
            "from the variant's ideal schedule to this one: summed |log2 head count difference| over layers; 0 = the ideal itself",
        ),
    ]


def prior_file_text(output: str) -> str:
    return f"prior: {output}"
