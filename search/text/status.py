"""The words of `status` and `best`: a study's verdict line, its table, its confirmation table, and what a storage
holds besides."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from search.analysis import MIN_CURVES, PairedGap, Summary
from search.analysis.blocked import ScheduleGap
from search.analysis.summary import ConfirmationRow
from search.outputs.urls import mask_url
from search.text.commands import confirm_line
from search.text.fidelity import rung_text
from search.text.plan import cost_text
from search.text.sheet import Sheet
from search.text.stats import paired_gap_text, tokens_text
from search.text.summary import (
    best_how,
    best_label,
    crossed_text,
    driver_gone_text,
    failed_text,
    failed_trial_text,
    gap_report_text,
    gap_text,
    look_texts,
    not_finite_text,
    pruning_text,
    rounds_text,
    unsaved_text,
)
from search.text.verdict import method_text, verdict_text

TOP_GAPS = 5  # schedules listed in `status` by paired mean; --json has all


def status_line(s: Summary) -> str:
    """The verdict, first: what a reader who reads one line should know."""
    return f"{s.name}: {verdict_text(s.verdict, s.name)}"


def status_sheet(s: Summary, wall_s: float | None, stopped: str | None = None, race: Mapping[str, str] | None = None) -> Sheet:
    """The study table: the schedules' gaps to uniform, references, rung fidelity, where the policies stand (`stopped`,
    `race`: the study's own words for them). `wall_s`: the training time of the command that just ran (None for
    `status`, whose verdict line names the next step already)."""
    sheet = Sheet(f"study {s.name}")
    counts = ", ".join(f"{k.lower()} {v}" for k, v in s.counts.items())
    confirmation = f", + {s.confirmation_runs} confirmation runs" if s.confirmation_runs else ""
    sheet.add("trials", f"{counts} (trained {s.trained} of target {s.n_trials}{confirmation})")
    if stopped:
        sheet.add("stopped early", stopped)
    if s.rounds:
        sheet.add("confirmation", rounds_text(s.rounds))
    seeds = len(s.best_seeds) > 1
    label = best_label(s)
    sheet.add(f"{label} schedule", f"{s.best_schedule} ({best_how(s)}; trial {s.best_number})" if s.best_schedule else "-")
    sheet.add(f"{label} val loss", f"{s.best_value:.4f}" + (" (mean)" if seeds else "") if s.best_value is not None else "-")
    sheet.add(
        "uniform baseline",
        f"{s.baseline_schedule}: {s.baseline_value:.4f}" + (" (mean, same seeds)" if seeds else "")
        if s.baseline_value is not None
        else s.baseline_schedule,
    )
    sheet.add("gap to uniform", gap_text(s))
    if s.method:
        sheet.add("gaps computed by", method_text(s.method))
    for gap in s.gaps[:TOP_GAPS]:
        sheet.add(f"  {gap.schedule}", _gap_row(gap))
    if len(s.gaps) > TOP_GAPS:
        sheet.add("  ...", f"{len(s.gaps) - TOP_GAPS} more (`status --json` lists every schedule)")
    if s.failed_runs:
        sheet.add("failed for good", failed_text(s))
    for failed in s.failed_trials:
        sheet.add("failed trial", failed_trial_text(failed))
    if s.verdict_one_kind is not None:
        sheet.add("across hardware", crossed_text(s))
    if s.not_finite:
        sheet.add("left out (not finite)", not_finite_text(s.not_finite))
    if s.driver_gone:
        sheet.add("driver gone", driver_gone_text(s.driver_gone, s.name))
    if s.unsaved:
        sheet.add("models not saved", unsaved_text(s.unsaved, TOP_GAPS))
    if s.uniform_noise_floor is not None:
        sheet.add("noise floor of uniform", f"sd {s.uniform_noise_floor:.4f} across baseline seeds")
    for ref in s.references:
        sheet.add(f"reference {ref.name}", f"{ref.schedule}: {ref.val_loss:.4f}, gap {gap_report_text(ref.gap)}")
    for point in s.pareto:
        sheet.add(
            "pareto",
            ", ".join([f"number {point.number}", f"schedule {point.schedule}", *(f"{k} {v:.4g}" for k, v in point.values.items())]),
        )
    if s.infeasible or s.duplicates:
        sheet.add("infeasible / duplicates", f"{s.infeasible} below min_throughput_ratio / {s.duplicates} served from cache")
    if s.fidelity is None:
        sheet.add("rung fidelity", f"not enough complete trials (needs {MIN_CURVES} with a full learning curve)")
    for rung in s.fidelity or []:
        sheet.add(f"fidelity at {tokens_text(rung.tokens)} tokens", rung_text(rung))
    if s.pruning_from:
        sheet.add("pruning starts", pruning_text(s.pruning_from))
    for schedule, position in (race or {}).items():
        sheet.add(f"race {schedule}", position)
    for number, look in enumerate(look_texts(s), 1):
        sheet.add(f"look {number}", look)
    if s.deciding:
        sheet.add("deciding costs", cost_text(s.deciding, "this study's median run"))
    if wall_s is not None:
        sheet.add("wall time", f"{wall_s:.1f} s")
    if wall_s is not None and s.verdict.next:
        sheet.add("next", f"train the seeds that decide: {confirm_line(s.name, s.verdict.next.top, s.verdict.next.seeds)}")
    return sheet


def _gap_row(gap: ScheduleGap) -> str:
    shown = PairedGap.of(gap.contrast, gap.adjusted_p)
    seeds = f"seed{'s' if len(gap.seeds) > 1 else ''} {', '.join(map(str, gap.seeds))}"  # which seeds, not how many
    return f"{paired_gap_text(shown)} {shown.verdict if shown.low is not None else ''} {seeds}".replace("  ", " ")


def confirmation_sheet(study: str, rows: Sequence[ConfirmationRow]) -> Sheet:
    """Each confirmed schedule's fresh seeds, mean loss and paired gap to uniform."""
    columns = ("schedule", "seeds", "val loss (mean ± sd)", "gap to uniform (paired, 95% t interval)", "verdict")
    sheet = Sheet(f"confirmation of {study} (fresh seeds, never searched on)", columns=columns)
    for row in rows:
        loss = (
            "-"
            if row.val_loss_mean is None
            else f"{row.val_loss_mean:.4f}" + (f" ± {row.val_loss_std:.4f}" if row.val_loss_std is not None else "")
        )
        gap = row.gap
        sheet.add(row.schedule, str(row.seeds), loss, paired_gap_text(gap) if gap else "(uniform)", gap.verdict if gap else "")
    return sheet


def no_studies_text(url: str) -> str:
    return f"no prism-search studies in {mask_url(url)} yet; start one with `prism-search run STUDY.toml`"


def left_out_text(study: str, why: str) -> str:
    """A study whose stored data cannot be read: named with why, never silently missing."""
    return f"study {study} left out: {why}"


def not_ours_text(names: Sequence[str]) -> str:
    """Studies another tool made in the same storage."""
    return f"not created by prism-search (left out): {', '.join(names)}"


def no_best_yet_text(study: str) -> str:
    """`best` of a study with no complete feasible trial."""
    return f"study {study!r} has no complete feasible trial yet; run or resume it"


def best_lines(s: Summary) -> list[str]:
    """`best`: tab-separated lines for scripts, the verdict first (`s` has a best schedule)."""
    lines = [f"verdict\t{verdict_text(s.verdict, s.name)}", f"{s.best_schedule}\tval_loss {s.best_value:.4f}\tgap to uniform {gap_text(s)}"]
    for point in s.pareto:
        cells = [f"number {point.number}", f"schedule {point.schedule}", *(f"{k} {v}" for k, v in point.values.items())]
        lines.append("pareto\t" + "\t".join(cells))
    return lines
