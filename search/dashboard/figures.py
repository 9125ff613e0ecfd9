"""Plotly figures of a study and of one trial: pure functions of `StudyView`/`TrialRow`, None when there is no data.

Point traces carry the trial number in `customdata`, so a click on a point opens that trial's page. Large
studies stay cheap: learning curves and the worker timeline are one trace per state (segments separated by
gaps), never one trace per trial; and no figure draws more trials than a browser shows apart (`MAX_POINTS`,
`MAX_CURVES`, `MAX_HEATMAP_ROWS`): past that it draws the ones a reader looks for (the best, the baseline, the
front) and an even spread of the rest, and its `sampled` text says so on the page.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import datetime

from search.analysis.stats import MIN_CURVES, RELIABLE_RHO
from search.analysis.summary import pareto_front
from search.attrs import ROLE_BASELINE, ROLE_REFERENCE, ROLE_SEARCH
from search.dashboard.views import (
    MIN_TRIALS_FOR_IMPORTANCE,
    StudyView,
    TrialRow,
    importance_points,
    layer_importance,
    loss_key,
    speed_of,
)
from search.outputs import jsonout
from search.text import rung_text, tokens_text

ROLE_STYLE = {  # marker symbol, colour, size
    ROLE_BASELINE: ("star", "#111111", 14),
    ROLE_REFERENCE: ("diamond", "#e07b00", 11),
    ROLE_SEARCH: ("circle", "#3b6fb6", 7),
}
STATE_COLOUR = {"COMPLETE": "#3b6fb6", "PRUNED": "#c44e52", "FAIL": "#7f7f7f", "RUNNING": "#55a868", "WAITING": "#cccccc"}


# Trials drawn at most per figure: a 400-pixel plot shows no more apart, and the study page stays under 1 MB at
# any number of trials (its figures are JSON in the page)
MAX_POINTS = 1000
MAX_CURVES = 300  # learning curves: lines, 6 or so points each
MAX_HEATMAP_ROWS = 200  # schedules: the plot is at most 900 px high
KEEP_BEST = 100  # of the trials drawn, always the best by val loss


class Figure(dict):
    """A plotly figure as plain JSON data for plotly.js. No plotly.py validation: that cost seconds per page on
    big studies, while these few trace types are easy to get right by hand (the browser tests draw each one).
    `sampled`: what it leaves out, for the page to say ("" when it draws every trial)."""

    def __init__(self, traces: dict | list[dict] | None = None):
        super().__init__(data=[traces] if isinstance(traces, dict) else list(traces or []), layout={})
        self.sampled = ""

    def add_trace(self, trace: dict) -> None:
        self["data"].append(trace)

    def update_yaxes(self, **kw) -> None:
        self["layout"].setdefault("yaxis", {}).update(kw)

    def to_json(self) -> str:
        return jsonout.dumps(self, separators=(",", ":"))


def _time(t: datetime) -> str:
    return t.replace(tzinfo=None).isoformat(sep=" ")  # plotly.js dates carry no time zone; Optuna stores naive ones


# plotly's toolbar (the modebar) sits in the top-right corner, about 30 px high: titles start below it, left-aligned
TITLE_BELOW_TOOLBAR_PX = 34


def _layout(fig: Figure, title: str, x: str, y: str, **kw) -> Figure:
    fig["layout"].update(
        title=dict(text=title, x=0, xanchor="left", xref="paper", y=1, yanchor="top", yref="container", pad=dict(t=TITLE_BELOW_TOOLBAR_PX)),
        height=kw.pop("height", 400),
        margin=dict(l=60, r=20, t=TITLE_BELOW_TOOLBAR_PX + 46, b=40),
        legend=dict(orientation="h", y=-0.3),
        paper_bgcolor="white",
        plot_bgcolor="white",
        **kw,
    )
    for axis, text in (("xaxis", x), ("yaxis", y)):
        fig["layout"].setdefault(axis, {}).update(title=dict(text=text), gridcolor="#eaeaea", zerolinecolor="#cccccc", automargin=True)
    return fig


def _label(r: TrialRow) -> str:
    loss = f"{r.val_loss:.4f}" if r.val_loss is not None else "-"
    return f"trial {r.number} ({r.role})<br>{r.schedule or '?'}<br>val loss {loss}"


def _by_role(rows: list[TrialRow], x, y) -> list[dict]:
    traces = []
    for role, (symbol, colour, size) in ROLE_STYLE.items():
        mine = (
            [r for r in rows if r.role == role]
            if role != ROLE_SEARCH
            else [r for r in rows if r.role not in (ROLE_BASELINE, ROLE_REFERENCE)]
        )
        if mine:
            traces.append(
                dict(
                    type="scatter",
                    x=[x(r) for r in mine],
                    y=[y(r) for r in mine],
                    mode="markers",
                    name=role,
                    marker=dict(symbol=symbol, color=colour, size=size, line=dict(width=0.5, color="white")),
                    customdata=[r.number for r in mine],
                    text=[_label(r) for r in mine],
                    hoverinfo="text",
                )
            )
    return traces


def _complete(view: StudyView) -> list[TrialRow]:
    return view.searched


def thin(rows: list[TrialRow], limit: int, keep: Iterable[TrialRow] = ()) -> list[TrialRow]:
    """At most `limit` of `rows`, in their order: the rows of `keep` first (the first `limit` of them), then an even
    spread of the others (every k-th: the same rows on every refresh of an unchanged study)."""
    if len(rows) <= limit:
        return rows
    chosen = set(list(dict.fromkeys(r.number for r in keep))[:limit])
    rest = [r for r in rows if r.number not in chosen]
    room = limit - len(chosen)
    chosen.update(rest[i * len(rest) // room].number for i in range(room))
    return [r for r in rows if r.number in chosen]


def _best(rows: list[TrialRow], n: int = KEEP_BEST) -> list[TrialRow]:
    return sorted(rows, key=loss_key)[:n]


def _anchors(rows: list[TrialRow]) -> list[TrialRow]:
    """What a thinned point figure always draws: the best trials and every baseline and reference run."""
    return _best(rows) + [r for r in rows if r.role in (ROLE_BASELINE, ROLE_REFERENCE)]


def _sampled(fig: Figure, drawn: int, of: int, what: str) -> None:
    if drawn < of:
        fig.sampled = f"{drawn:,} of {of:,} trials drawn ({what}): prism-search export lists them all"


# -- study figures --------------------------------------------------------------------------------------


def history(view: StudyView) -> Figure | None:
    """Val loss of every completed search trial by trial number, with the best so far (confirmation runs left out)."""
    done = _complete(view)
    if not done:
        return None
    best, records = math.inf, []  # each trial that lowered the best so far: the steps of the line
    for r in done:
        if loss_key(r) < best:
            best = loss_key(r)
            records.append(r)
    drawn = thin(done, MAX_POINTS, records + _anchors(done))
    fig = Figure(_by_role(drawn, lambda r: r.number, lambda r: r.val_loss))
    xs, ys = [r.number for r in records] + [done[-1].number], [r.val_loss for r in records] + [best]
    fig.add_trace(
        dict(type="scatter", x=xs, y=ys, mode="lines", name="best so far", line=dict(shape="hv", color="#55a868"), hoverinfo="skip")
    )
    _sampled(fig, len(drawn), len(done), f"each new best, the best {KEEP_BEST}, baselines and an even spread of the rest")
    return _layout(fig, "Optimisation history", "trial", "val loss")


def pareto(view: StudyView) -> Figure | None:
    """Val loss against training throughput; in a two-objective study the front is what a user picks from, in a
    single-objective one the same line only shows the trade-off (throughput was not optimised)."""
    speed, axis = speed_of(view.metric_names)
    done = [r for r in _complete(view) if speed(r) is not None]
    if len(done) < 2:
        return None
    title = pareto_title(view)

    def speed_key(row: TrialRow) -> float:
        return speed(row) or 0.0  # every row in `done` has one

    front = sorted((done[i] for i in pareto_front([(loss_key(r), speed_key(r)) for r in done])), key=speed_key)
    drawn = thin(done, MAX_POINTS, front + _anchors(done))
    fig = Figure(_by_role(drawn, speed, lambda r: r.val_loss))
    _sampled(fig, len(drawn), len(done), f"the front, the best {KEEP_BEST}, baselines and an even spread of the rest")
    fig.add_trace(
        dict(
            type="scatter",
            x=[speed(r) for r in front],
            y=[r.val_loss for r in front],
            mode="lines+markers",
            name="Pareto front" if title.startswith("Pareto") else "non-dominated (throughput not optimised)",
            line=dict(color="#c44e52", dash="dot"),
            marker=dict(size=5, color="#c44e52"),
            customdata=[r.number for r in front],
            text=[_label(r) for r in front],
            hoverinfo="text",
        )
    )
    return _layout(fig, title, axis, "val loss (lower is better)")


def pareto_title(view: StudyView) -> str:
    optimised = {"throughput", "tokens_per_s"} & set(view.metric_names)
    return "Pareto front: val loss × throughput" if optimised else "Val loss × throughput (throughput not optimised)"


def fidelity(view: StudyView) -> Figure | None:
    """Within-seed rank agreement (Spearman rho, 95% bootstrap interval where there are enough runs) of the val loss
    at each evaluation with the final val loss; red where pruning there is unreliable."""
    rungs = view.summary.fidelity if view.summary else None
    if not rungs:
        return None
    agreements = [r.agreement for r in rungs]
    fig = Figure(
        dict(
            type="scatter",
            x=[r.tokens for r in rungs],
            y=[a.rho for a in agreements],
            mode="lines+markers",
            name="within-seed Spearman rho",
            error_y=dict(
                type="data",
                symmetric=False,
                array=[(a.high - a.rho) if a.high is not None else 0 for a in agreements],
                arrayminus=[(a.rho - a.low) if a.low is not None else 0 for a in agreements],
                color="#555555",
            ),
            marker=dict(size=9, color=["#3b6fb6" if r.reliable else "#c44e52" for r in rungs]),
            line=dict(color="#3b6fb6"),
            text=[f"{tokens_text(r.tokens)} tokens: {rung_text(r)}" for r in rungs],
            hoverinfo="text",
        )
    )
    fig.add_trace(
        dict(
            type="scatter",
            x=[rungs[0].tokens, rungs[-1].tokens],
            y=[RELIABLE_RHO] * 2,
            mode="lines",
            name=f"rho {RELIABLE_RHO}: below it a rung ranks unlike the final loss",
            line=dict(color="#c44e52", dash="dot"),
        )
    )
    fig.update_yaxes(range=[-1.05, 1.05])
    return _layout(
        fig, "Rung fidelity: does an early val loss rank trials like the final one?", "training tokens", "Spearman rho with final val loss"
    )


def importance(view: StudyView) -> Figure | None:
    """How much each layer's head count explains val loss (PED-ANOVA over the decoded per-layer counts)."""
    scores = layer_importance(view.rows)
    if scores is None:
        return None
    layers = list(scores)
    fig = Figure(
        dict(
            type="bar",
            x=[f"layer {i}" for i in layers],
            y=[scores[i] for i in layers],
            marker_color="#3b6fb6",
            text=[f"{scores[i]:.2f}" for i in layers],
            textposition="outside",
            hovertemplate="%{x}: %{y:.3f}<extra></extra>",
        )
    )
    return _layout(fig, "Per-layer importance of the head count (PED-ANOVA)", "layer", "importance (sums to 1)", showlegend=False)


def _log2_padded(heads: tuple[int, ...], n_layer: int) -> list[float | None]:
    """log2 of each layer's heads, None (a blank cell) past the last layer of a shallower trial."""
    return [math.log2(heads[i]) if i < len(heads) else None for i in range(n_layer)]


def heatmap(view: StudyView) -> Figure | None:
    """Trials x layers, colour = log2 heads, best trial on top: which schedules win, at a glance."""
    ranked = sorted((r for r in _complete(view) if r.heads), key=loss_key)
    if not ranked:
        return None
    done = ranked[:MAX_HEATMAP_ROWS]
    n_layer = max(len(r.heads or ()) for r in done)
    z = [_log2_padded(r.heads or (), n_layer) for r in done]
    text = [[f"{h} heads" for h in r.heads or ()] for r in done]
    fig = Figure(
        dict(
            type="heatmap",
            z=z,
            x=[f"L{i}" for i in range(n_layer)],
            y=[f"{rank}. {r.schedule or '-'}" for rank, r in enumerate(done, 1)],  # the rank keeps a repeated schedule's rows apart
            colorscale="Viridis",
            customdata=[[r.number] * n_layer for r in done],
            text=text,
            hovertemplate="%{y} (trial %{customdata})<br>%{x}: %{text}<extra></extra>",
            colorbar=dict(title=dict(text="log2 heads")),
        )
    )
    fig.update_yaxes(autorange="reversed", type="category")
    height = max(380, min(900, 80 + 14 * len(done)))
    if len(done) < len(ranked):
        fig.sampled = f"the best {len(done):,} of {len(ranked):,} schedules: prism-search export lists them all"
    return _layout(fig, "Schedules sorted by val loss (rank 1 = best)", "layer", "rank. schedule", height=height)


def curves(view: StudyView) -> Figure | None:
    """Learning curves (val loss by training tokens); pruned trials in red, ending in a cross where they stopped."""
    every = [r for r in view.rows if r.curve and r.state in ("COMPLETE", "PRUNED", "RUNNING")]
    if not every:
        return None
    running = [r for r in every if r.state == "RUNNING"]
    best = _best([r for r in every if r.state == "COMPLETE"], MAX_CURVES // 5)
    shown = thin(every, MAX_CURVES, running + best)
    fig = Figure()
    _sampled(fig, len(shown), len(every), f"the running ones, the best {len(best)} and an even spread of the rest")
    for state in ("COMPLETE", "RUNNING", "PRUNED"):
        mine = [r for r in shown if r.state == state]
        if not mine:
            continue
        xs: list[float | None] = []  # None between trials: plotly breaks the line there
        ys: list[float | None] = []
        ids: list[int | None] = []
        for r in mine:
            xs += [tokens for tokens, _ in r.curve] + [None]
            ys += [loss for _, loss in r.curve] + [None]
            ids += [r.number] * len(r.curve) + [None]
        fig.add_trace(
            dict(
                type="scatter",  # hover via a template, not a string per point: 5,000 trials stay small
                x=xs,
                y=ys,
                mode="lines+markers",
                name=state.lower(),
                customdata=ids,
                hovertemplate=f"trial %{{customdata}} ({state.lower()})<br>%{{x:,}} tokens: %{{y:.4f}}<extra></extra>",
                line=dict(width=1, color=STATE_COLOUR[state]),
                marker=dict(size=4),
                opacity=0.7,
                connectgaps=False,
            )
        )
        if state == "PRUNED":
            ends = [r for r in mine if r.curve]
            fig.add_trace(
                dict(
                    type="scatter",
                    x=[r.curve[-1][0] for r in ends],
                    y=[r.curve[-1][1] for r in ends],
                    mode="markers",
                    name="pruned here",
                    marker=dict(symbol="x", size=9, color=STATE_COLOUR["PRUNED"]),
                    customdata=[r.number for r in ends],
                    text=[f"trial {r.number} pruned at {r.curve[-1][0]:,.0f} tokens" for r in ends],
                    hoverinfo="text",
                )
            )
    base = view.baseline
    if base is not None and base.curve:
        fig.add_trace(
            dict(
                type="scatter",
                x=[c[0] for c in base.curve],
                y=[c[1] for c in base.curve],
                mode="lines+markers",
                name=f"uniform baseline (trial {base.number})",
                line=dict(width=3, color="#111111"),
                customdata=[base.number] * len(base.curve),
                text=[_label(base)] * len(base.curve),
                hoverinfo="text",
            )
        )
    return _layout(fig, "Learning curves", "training tokens", "val loss")


def timeline(view: StudyView) -> Figure | None:
    """Which worker ran which trial when: gaps show idle workers, red bars pruned trials."""
    started = [r for r in view.rows if r.start is not None]
    if not started:
        return None
    now = max(r.complete or r.start or datetime.min for r in started)
    workers = sorted({r.worker or "unknown" for r in started})
    rows = sorted(started, key=lambda r: r.start or now)[-MAX_POINTS:]  # what the workers did last
    fig = Figure()
    if len(rows) < len(started):
        fig.sampled = f"the last {len(rows):,} of {len(started):,} trials to start: prism-search export lists them all"
    for state, colour in STATE_COLOUR.items():
        mine = [r for r in rows if r.state == state]
        if not mine:
            continue
        xs, ys, ids = [], [], []
        for r in mine:
            end = r.complete or now
            xs += [_time(r.start or end), _time(end), None]
            ys += [r.worker or "unknown"] * 2 + [None]
            ids += [r.number, r.number, None]
        fig.add_trace(
            dict(
                type="scatter",
                x=xs,
                y=ys,
                mode="lines+markers",
                name=state.lower(),
                line=dict(width=10, color=colour),
                marker=dict(size=3, color=colour),
                customdata=ids,
                connectgaps=False,
                hovertemplate=f"trial %{{customdata}} ({state.lower()})<br>%{{x}}<br>%{{y}}<extra></extra>",
            )
        )
    fig.update_yaxes(categoryorder="array", categoryarray=workers)
    return _layout(fig, "Worker timeline", "time", "worker", height=max(300, 120 + 40 * len(workers)))


def study_figures(view: StudyView) -> list[tuple[str, Figure | None, str]]:
    """(id, figure or None, note shown when None) in page order; shared by the study page and the report."""
    return [
        ("history", history(view), "no completed trials yet"),
        ("pareto", pareto(view), "no throughput measured yet (needs 2 completed trials with tokens/s)"),
        ("importance", importance(view), importance_note(view.rows)),
        ("heatmap", heatmap(view), "no completed trials with a schedule yet"),
        ("curves", curves(view), "no learning curves reported yet"),
        ("fidelity", fidelity(view), f"not enough complete trials (needs {MIN_CURVES} with a full learning curve)"),
        ("timeline", timeline(view), "no trial has started yet"),
    ]


def importance_note(rows: list[TrialRow]) -> str:
    """What the importance panel needs, and how far the study is from it (a quickstart completes fewer trials)."""
    have = len(importance_points(rows))
    need = MIN_TRIALS_FOR_IMPORTANCE
    if have < need:
        return f"needs {need} completed trials with a schedule; this study has {have} ({need - have} to go)"
    return f"every one of the {have} completed trials has the same head count in every layer: nothing varies, nothing to explain"


# -- trial figures --------------------------------------------------------------------------------------


def schedule_diagram(row: TrialRow, baseline: TrialRow | None, d_model: int | None = None) -> Figure | None:
    """Heads per layer, labelled heads x head dim, against the uniform baseline's."""
    if not row.heads:
        return None
    layers = [f"L{i}" for i in range(len(row.heads))]
    fig = Figure(
        dict(
            type="bar",
            x=layers,
            y=list(row.heads),
            name=f"trial {row.number}: {row.schedule}",
            marker_color="#3b6fb6",
            text=[f"{h} × {d_model // h}" if d_model else str(h) for h in row.heads],
            textposition="outside",
            customdata=[row.number] * len(layers),
            hovertemplate="%{x}: %{y} heads<extra></extra>",
        )
    )
    if baseline is not None and baseline.heads and baseline.number != row.number:
        fig.add_trace(
            dict(
                type="scatter",
                x=layers,
                y=list(baseline.heads),
                mode="lines+markers",
                name=f"uniform baseline: {baseline.schedule}",
                line=dict(color="#111111", dash="dash"),
                customdata=[baseline.number] * len(layers),
                hovertemplate="%{x}: %{y} heads (baseline)<extra></extra>",
            )
        )
    return _layout(fig, "Schedule: heads × head dim per layer", "layer", "heads")


def trial_curve(row: TrialRow, baseline: TrialRow | None) -> Figure | None:
    if not row.curve:
        return None
    fig = Figure(
        dict(
            type="scatter",
            x=[c[0] for c in row.curve],
            y=[c[1] for c in row.curve],
            mode="lines+markers",
            name=f"trial {row.number}",
            line=dict(color=STATE_COLOUR.get(row.state, "#3b6fb6")),
            customdata=[row.number] * len(row.curve),
        )
    )
    if row.state == "PRUNED":
        fig.add_trace(
            dict(
                type="scatter",
                x=[row.curve[-1][0]],
                y=[row.curve[-1][1]],
                mode="markers",
                name="pruned here",
                marker=dict(symbol="x", size=12, color=STATE_COLOUR["PRUNED"]),
            )
        )
    if baseline is not None and baseline.curve and baseline.number != row.number:
        fig.add_trace(
            dict(
                type="scatter",
                x=[c[0] for c in baseline.curve],
                y=[c[1] for c in baseline.curve],
                mode="lines+markers",
                name=f"uniform baseline (trial {baseline.number})",
                line=dict(color="#111111", dash="dash"),
                customdata=[baseline.number] * len(baseline.curve),
            )
        )
    return _layout(fig, "Learning curve against the paired uniform baseline", "training tokens", "val loss")


AUDIT_METRICS = {  # LayerMetrics field -> axis title
    "mad": "mean attention distance (tokens)",
    "mad_relative": "relative attention distance",
    "attn_entropy": "attention entropy (nats)",
    "matrix_entropy": "matrix entropy (normalised)",
    "token_curvature": "token curvature (rad)",
    "depth_curvature": "depth curvature (rad)",
}


def audit_profiles(row: TrialRow, baseline: TrialRow | None) -> list[tuple[str, Figure]]:
    """One plot per stored geometry metric: this trial's per-layer profile against the uniform baseline's."""
    if not row.audit:
        return []
    figs = []
    for key, title in AUDIT_METRICS.items():
        mine = [(a.get("layer", i), a.get(key)) for i, a in enumerate(row.audit)]
        if all(v is None for _, v in mine):
            continue
        fig = Figure(
            dict(
                type="scatter",
                x=[l for l, _ in mine],
                y=[v for _, v in mine],
                mode="lines+markers",
                name=f"trial {row.number}",
                line=dict(color="#3b6fb6"),
            )
        )
        if baseline is not None and baseline.audit and baseline.number != row.number:
            base = [(a.get("layer", i), a.get(key)) for i, a in enumerate(baseline.audit)]
            fig.add_trace(
                dict(
                    type="scatter",
                    x=[l for l, _ in base],
                    y=[v for _, v in base],
                    mode="lines+markers",
                    name=f"uniform baseline (trial {baseline.number})",
                    line=dict(color="#111111", dash="dash"),
                )
            )
        _layout(fig, title, "layer", title, height=320)
        fig["layout"]["xaxis"]["dtick"] = 1
        figs.append((f"audit-{key}", fig))
    return figs
