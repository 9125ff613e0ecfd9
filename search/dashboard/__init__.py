"""search.dashboard: a live, schedule-aware web dashboard and a one-file HTML report of prism-search studies."""

from search.dashboard.app import Dashboard, DashboardError, bind_warning, make_server_for, open_readonly, serve
from search.dashboard.report import write_report
from search.dashboard.views import StudyView, layer_importance, study_view

__all__ = [
    "Dashboard",
    "DashboardError",
    "StudyView",
    "bind_warning",
    "layer_importance",
    "make_server_for",
    "open_readonly",
    "serve",
    "study_view",
    "write_report",
]
