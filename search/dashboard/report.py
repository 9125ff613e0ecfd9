"""`prism-search report`: the study page as one self-contained HTML file (plotly.js inlined, opens offline)."""

from __future__ import annotations

from pathlib import Path

import optuna

from search.dashboard.app import DashboardError, open_readonly
from search.dashboard.pages import study_page
from search.dashboard.views import study_view
from search.urls import mask_url


def write_report(storage_url: str, name: str, output: str | Path) -> Path:
    """Write the report of study `name` to `output`; returns the path. Reads the database, never writes it."""
    output = Path(output)
    if not output.parent.is_dir():
        raise DashboardError(f"-o {str(output)!r}: folder {str(output.parent)!r} does not exist; create it first")
    try:
        study = optuna.load_study(study_name=name, storage=open_readonly(storage_url))
    except KeyError:
        raise DashboardError(f"no study named {name!r} in {mask_url(storage_url)}; check the name or --storage") from None
    output.write_text(study_page(study_view(study), mask_url(storage_url), live=False), encoding="utf-8")
    return output
