"""The words of `plan` (search.analysis.forecast): what a verdict at the margin costs, in seeds, runs, tokens and
hours, and where each figure came from."""

from __future__ import annotations

from search.analysis import NOISE_PAIRED, NOISE_STATED, SPEED_MEASURED, SPEED_STATED, SPEED_STORED, Cost, Forecast
from search.text.commands import confirm_line
from search.text.sheet import Sheet
from search.text.stats import tokens_text
from search.text.summary import forecast_command
from search.text.verdict import method_text


def hours_text(hours: float) -> str:
    return f"{hours:,.1f} h" if hours >= 1 else f"{max(hours * 60, 1):.0f} min" if hours * 60 >= 0.5 else "under a minute"


def cost_text(c: Cost, speed: str) -> str:
    """Runs, tokens and hours of training one run at a time, at the tokens/s that `speed` names."""
    text = f"{c.runs} runs, {tokens_text(c.tokens)} training tokens"
    if c.hours is None or c.tokens_per_s is None:
        return f"{text}; no tokens/s recorded, so no time"
    return f"{text}, {hours_text(c.hours)} of training one run at a time at {c.tokens_per_s:,.0f} tokens/s ({speed})"


def forecast_sheet(f: Forecast) -> Sheet:
    """The plan table: the noise and its source, the seeds it needs, the runs of search and confirmation, the total."""
    m = f"{f.margin:.4g}"
    then = "two confirmation rounds" if f.rounds else f"confirm the top {f.top} on fresh seeds"
    sheet = Sheet(f"plan for {f.study} at margin {m}: search at one seed, then {then}")
    n = f.noise
    if n.source == NOISE_STATED:
        where = "stated (--sd)"
    elif n.source == NOISE_PAIRED:
        where = f"the paired runs of study {n.study} ({method_text(n.method)})"
    else:
        where = (
            f"sqrt 2 x uniform's sd across the {(n.df or 0) + 1} seeds of study {n.study}: no schedule has paired seeds there, so "
            "this is an upper bound (pairing removes each seed's own luck, which this sd holds)"
        )
    sheet.add("noise", f"sd {n.sd_pair:.4f} of one paired difference: {where}")
    if f.pairs is None or f.resolution is None or f.total is None:  # never for rounds: their runs are fixed
        sheet.add("seeds", f"over 1,000 paired seeds per schedule: a margin of {m} is below what seeds resolve at this noise")
        return sheet
    if f.rounds:
        seeds, confirm = _rounds_rows(f, f.pairs, f.resolution)
    else:
        detects = f"they detect {f.resolution:.4f} with 80% power, two-sided test at 0.05"
        seeds = f"{f.pairs} paired seeds per schedule resolve {m} ({detects})"
        each = f"{f.top} schedules and uniform x {f.pairs} fresh seeds; {f.top} is confirm's default --top"
        confirm = f"{f.confirm_runs} runs: `{forecast_command(f)}` ({each})"
    sheet.add("seeds", seeds)
    space = f"; the space holds {f.space}" if f.search_runs < f.n_trials else ""
    sheet.add("search", f"{f.search_runs} runs at the study seed (n_trials {f.n_trials}{space})")
    sheet.add("confirm", confirm)
    sheet.add("total", f"{f.total.runs} runs x {tokens_text(f.tokens_per_run)} tokens = {tokens_text(f.total.tokens)} training tokens")
    sheet.add("time", _forecast_time(f))
    if not f.rounds:
        sheet.add("left at one seed", "schedules the search trains once and confirm does not take are judged on one pair each")
    return sheet


def _rounds_rows(f: Forecast, pairs: int, resolution: float) -> tuple[str, str]:
    """The seeds and confirm rows of a study confirmed in rounds: its runs are fixed; what its test resolves here."""
    m = f"{f.margin:.4g}"
    resolves = (
        f"resolves the margin {m}"
        if resolution <= f.margin
        else f"does not resolve the margin {m} at this noise: it needs {f.needed} paired seeds, `{confirm_line(f.study, 1, f.needed)}` "
        "after the rounds"
        if f.needed
        else f"does not resolve the margin {m} at this noise, nor would any number of seeds up to 1,000"
    )
    seeds = (
        f"the frozen pick and uniform on {pairs} fresh seeds, tested on the residual variance pooled over every run "
        f"({f.rounds_df} df): detects {resolution:.4f} with 80% power, two-sided test at 0.05; it {resolves}"
    )
    confirm = (
        f"{f.confirm_runs} runs that `run` trains after the search: round 1, the best {f.top} and uniform on one fresh seed "
        f"({f.top + 1} runs); round 2, the best of them frozen and uniform on {pairs} new seeds ({2 * pairs} runs)"
    )
    return seeds, confirm


def _forecast_time(f: Forecast) -> str:
    s, hours = f.speed, f.total.hours if f.total else None
    if s is None or hours is None:
        return (
            "no tokens/s: the config trains on a GPU, none is here, and the GPU recipe states no measured figure "
            "(scripts/gpu_recipe.py times a trial at an assumed MFU, or measures it with --measure on a GPU); pass --tokens-per-s"
        )
    source = {
        SPEED_STATED: "given --tokens-per-s",
        SPEED_STORED: f"the median of study {s.study}'s {s.runs} stored runs, on the machines they ran on",
        SPEED_MEASURED: f"measured here: uniform {s.schedule}, {s.steps} steps after {s.warmup} warm-up, {s.threads} thread(s), {s.device}",
    }[s.source]
    text = f"{hours_text(hours)} of training one run at a time at {s.tokens_per_s:,.0f} tokens/s ({source})"
    if f.workers > 1:
        text += f"; about {hours_text(hours / f.workers)} on its {f.workers} workers if each keeps that speed"
    return text
