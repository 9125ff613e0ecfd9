"""HTML for every page, from Jinja templates (autoescaped: trial attrs and error texts are user data).

Figures travel as JSON inside `<script type="application/json">` and are drawn by one small loader in the page,
so the study page served live and the offline report are the same template with different plotly sources.
"""

from __future__ import annotations

from datetime import UTC, datetime
from functools import lru_cache
from urllib.parse import quote

import jinja2
import plotly.offline

from search import text
from search.dashboard import figures as figs
from search.dashboard.views import StudyView, TrialRow, loss_key, same_budget_gap
from search.text import tokens_text

REFRESH_MS = 5000
_TITLES = {
    "history": "Optimisation history",
    "pareto": "Pareto front",
    "importance": "Per-layer importance",
    "heatmap": "Schedule heatmap",
    "curves": "Learning curves",
    "timeline": "Worker timeline",
    "schedule": "Schedule",
    "curve": "Learning curve",
    "fidelity": "Rung fidelity",
}

_env = jinja2.Environment(loader=jinja2.PackageLoader("search.dashboard", "templates"), autoescape=True)


def _segment(name: str) -> str:
    """A study name as one URL path segment (or query value): `/`, `%`, `?`, `#` and non-ASCII encoded too."""
    return quote(name, safe="")


_env.filters["segment"] = _segment
_env.globals["text"] = text  # the words every display shares: search.text

# What JSON may not carry raw inside <script>: `</script>` ends the element and `<!--<script>` derails the HTML
# parser until the page's end; U+2028/9 end a line for older JavaScript parsers. Each becomes a \u escape,
# which JSON reads back as the same character (they only ever occur inside JSON strings).
_SCRIPT_SAFE = str.maketrans({c: f"\\u{ord(c):04x}" for c in "<>&\u2028\u2029"})


def script_json(text: str) -> str:
    """JSON text that is safe to embed in a <script> element, whatever strings (study names, trial attrs) it holds."""
    return text.translate(_SCRIPT_SAFE)


@lru_cache(maxsize=1)
def plotly_js() -> str:
    """plotly.js from the installed plotly package: served locally or inlined, never fetched from a CDN."""
    return plotly.offline.get_plotlyjs()


def _figure(fig_id: str, fig: figs.Figure | None, note: str = "", title: str | None = None) -> dict:
    json = script_json(fig.to_json()) if fig is not None else None
    sampled = fig.sampled if fig is not None else ""
    return {"id": fig_id, "json": json, "note": note, "sampled": sampled, "title": title or _TITLES.get(fig_id, fig_id)}


def _common(storage: str, root: str, live: bool, stamp: str | None, stamp_query: str = "", trial_base: str = "") -> dict:
    return {
        "storage": storage,
        "root": root,
        "live": live,
        "stamp": stamp,
        "stamp_query": stamp_query,
        "trial_base": trial_base,
        "refresh_ms": REFRESH_MS,
        "plotly_inline": None if live else plotly_js(),
        "generated": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
    }


def _study_path(root: str, name: str) -> str:
    return f"{root}study/{_segment(name)}"


def studies_page(
    views: list[StudyView], storage: str, root: str = "/", unreadable: dict[str, str] | None = None, stamp: str | None = None
) -> str:
    """Every readable study's row, and one row per unreadable study saying why (`unreadable`: by name). `stamp`:
    the one `/api/stamp` answers for these studies (by default, the views')."""
    return _env.get_template("studies.html").render(
        studies=views,
        unreadable=unreadable or {},
        has_figures=False,
        **_common(storage, root, True, stamp or "-".join(v.stamp for v in views) or "empty"),
    )


def study_page(view: StudyView, storage: str, root: str = "/", live: bool = True) -> str:
    """The study page; `live=False` makes the offline report: plotly inlined, no links to a server, no polling."""
    ranked = sorted(view.searched, key=loss_key)
    active = [r for r in view.rows if r.state in ("RUNNING", "FAIL")][-20:]
    titles = {"pareto": figs.pareto_title(view)}
    return _env.get_template("study.html").render(
        view=view,
        s=view.summary,
        best=ranked[:25],
        active=active,
        has_figures=True,
        tokens_text=tokens_text,
        figures=[_figure(i, f, note, titles.get(i)) for i, f, note in figs.study_figures(view)],
        **_common(storage, root, live, view.stamp, f"?study={_segment(view.name)}", f"{_study_path(root, view.name)}/trial/"),
    )


def trial_page(view: StudyView, row: TrialRow, storage: str, root: str = "/") -> str:
    baseline = view.baseline_for(row)
    figures = [
        _figure(
            "schedule", figs.schedule_diagram(row, baseline, view.config.model.d_model if view.config else None), "no schedule recorded"
        ),
        _figure("curve", figs.trial_curve(row, baseline), "no evaluation reported yet"),
    ] + [_figure(i, f) for i, f in figs.audit_profiles(row, baseline)]
    return _env.get_template("trial.html").render(
        view=view,
        row=row,
        baseline=baseline,
        gap=same_budget_gap(row, baseline),
        tokens_text=tokens_text,
        figures=figures,
        has_figures=True,
        **_common(storage, root, True, view.stamp, f"?study={_segment(view.name)}", f"{_study_path(root, view.name)}/trial/"),
    )


def error_page(status: str, heading: str, message: str, storage: str, hint: str = "", root: str = "/") -> str:
    return _env.get_template("error.html").render(
        status=status,
        heading=heading,
        message=message,
        hint=hint,
        has_figures=False,
        **_common(storage, root, True, None),
    )
