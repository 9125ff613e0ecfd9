"""`prism-search report`: the study page as one self-contained HTML file (plotly.js inlined, opens offline)."""

from __future__ import annotations

from pathlib import Path

import optuna

from search.dashboard.app import DashboardError, open_readonly
from search.dashboard.pages import study_page
from search.dashboard.views import study_view
from search.errors import ConfigError
from search.outputs import check_output, write_output
from search.outputs.urls import mask_url


def write_report(storage_url: str, name: str, output: str | Path) -> Path:
    """Write the report of study `name` to `output`; returns the path. Reads the database, never writes it."""
    check_output(output, "-o", ".html")  # before the study is read
    try:
        study = optuna.load_study(study_name=name, storage=open_readonly(storage_url))
    except KeyError:
        raise DashboardError(f"no study named {name!r} in {mask_url(storage_url)}; check the name or --storage") from None
    view = study_view(study)
    if view.config_error:  # the dashboard shows such a study as a plain Optuna one; a report of it says what status says
        raise ConfigError(view.config_error)
    return write_output(output, study_page(view, mask_url(storage_url), live=False), "-o", ".html")
