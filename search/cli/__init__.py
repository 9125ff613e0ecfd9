"""`prism-search`: a thin Typer face over the search API. Parse, call, render; no logic of its own.

Each part is reached through its package's public face only (search.study for whatever trains or writes a study,
search.analysis for reading one, search.priors, search.dashboard, ...; tests/test_layout.py checks it), imported
inside the commands that need it, so `--help` and `status` load no more than they use. Every user-fixable error
(PrismSearchError) prints one line and exits with code 2, before any compute and without touching stored data.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, NoReturn

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from search.attrs import ATTR_CHECKPOINT, ATTR_CHECKPOINT_ERROR
from search.config import DEFAULT_STORAGE, MAX_SEEDS, STORAGE_ENV, load_config, resume_command, storage_or_default
from search.errors import OutputError, PrismSearchError
from search.outputs.jsonout import dumps as json_text
from search.outputs.urls import mask_url

if TYPE_CHECKING:
    from search.analysis import Cost, Forecast, Summary
    from search.study import Standing, Study, StudyProgress

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Search per-layer attention head schedules.")
# markup off: every string printed holds user text (study and reference names, schedules, errors), and rich would
# read `[/x]` in a reference name as a tag and crash; the CLI styles nothing by markup
console = Console(markup=False)
err = Console(stderr=True, markup=False)


def _storage_given(url: str | None) -> str | None:
    """`--storage ""` (an unset shell variable) would read or write the default database unnoticed."""
    if url is not None and not url.strip():
        raise typer.BadParameter(f"--storage is empty; name a database URL such as {DEFAULT_STORAGE}, or leave the option out")
    return url


_STORAGE_HELP = f"SQLAlchemy URL (default: ${STORAGE_ENV}, else {DEFAULT_STORAGE})"
StorageOpt = typer.Option(
    None, "--storage", callback=_storage_given, help=f"SQLAlchemy URL (default: the study's, else ${STORAGE_ENV}, else {DEFAULT_STORAGE})"
)
WorkersOpt = typer.Option(None, "--workers", min=1, help="trials run at once (default: the study's resources.workers)")
NTrialsOpt = typer.Option(None, "--n-trials", min=1, help="total trained trials the study should reach (served duplicates do not count)")
TrackOpt = typer.Option(
    None, "--track", help="log every finished trial to mlflow, tensorboard or wandb; NAME or NAME=URI/FOLDER, repeatable"
)
AddressOpt = typer.Option(None, "--address", help="Ray cluster address HOST:PORT (default: start a local Ray); needs a network --storage")


class _Interrupted(Exception):
    """Ctrl-C or SIGTERM inside a study's lifecycle: its message says what was kept and how to go on (exit 130)."""


def _train(study: Study, train: Callable[[StudyProgress], Summary]) -> None:
    """`run` and `resume` (`train`: the study's method with the command's flags): the study trains, the CLI prints.
    Ctrl-C or SIGTERM at any moment (before Ray is up too) ends with exit code 130 and what to do next."""
    from search.cli.progress import Progress
    from search.study import StudyInterrupted

    try:
        summary = train(Progress(console=console))
    except StudyInterrupted as interrupt:
        if interrupt.stored:
            advice = f"interrupted: in-flight trials were marked FAIL and queued again; continue with\n  {resume_command(study.config)}"
        else:
            advice = f"interrupted before study {study.name!r} was created: nothing was stored; run it again to start it"
        raise _Interrupted(advice) from interrupt
    _print_summary(summary, study.wall_s, study.standing())


def _print_summary(s: Summary, wall_s: float | None, standing: Standing | None = None) -> None:
    """The verdict first, then the study table (the schedules' gaps to uniform, references, rung fidelity, where
    the policies stand), the confirmation table and the warnings."""
    from search.analysis import MIN_CURVES
    from search.text import (
        best_how,
        best_label,
        confirm_line,
        crossed_text,
        driver_gone_text,
        failed_text,
        failed_trial_text,
        gap_report_text,
        gap_text,
        look_texts,
        method_text,
        not_finite_text,
        pruning_text,
        rounds_text,
        rung_text,
        tokens_text,
        unsaved_text,
        verdict_text,
        warnings,
    )

    console.print(Text(f"{s.name}: {verdict_text(s.verdict, s.name)}"), soft_wrap=True)
    table = Table(title=f"study {s.name}", show_header=False)
    counts = ", ".join(f"{k.lower()} {v}" for k, v in s.counts.items())
    confirmation = f", + {s.confirmation_runs} confirmation runs" if s.confirmation_runs else ""
    table.add_row("trials", f"{counts} (trained {s.trained} of target {s.n_trials}{confirmation})")
    if standing and standing.stopped:
        table.add_row("stopped early", standing.stopped.text())
    if s.rounds:
        table.add_row("confirmation", rounds_text(s.rounds))
    seeds = len(s.best_seeds) > 1
    label = best_label(s)
    table.add_row(f"{label} schedule", f"{s.best_schedule} ({best_how(s)}; trial {s.best_number})" if s.best_schedule else "-")
    table.add_row(f"{label} val loss", f"{s.best_value:.4f}" + (" (mean)" if seeds else "") if s.best_value is not None else "-")
    table.add_row(
        "uniform baseline",
        f"{s.baseline_schedule}: {s.baseline_value:.4f}" + (" (mean, same seeds)" if seeds else "")
        if s.baseline_value is not None
        else s.baseline_schedule,
    )
    table.add_row("gap to uniform", gap_text(s))
    if s.method:
        table.add_row("gaps computed by", method_text(s.method))
    for gap in s.gaps[:TOP_GAPS]:
        table.add_row(f"  {gap.schedule}", _gap_row(gap))
    if len(s.gaps) > TOP_GAPS:
        table.add_row("  ...", f"{len(s.gaps) - TOP_GAPS} more (`status --json` lists every schedule)")
    if s.failed_runs:
        table.add_row("failed for good", Text(failed_text(s)))  # the errors are text, never markup
    for failed in s.failed_trials:
        table.add_row("failed trial", Text(failed_trial_text(failed)))
    if s.verdict_one_kind is not None:
        table.add_row("across hardware", Text(crossed_text(s)))
    if s.not_finite:
        table.add_row("left out (not finite)", Text(not_finite_text(s.not_finite)))
    if s.driver_gone:
        table.add_row("driver gone", Text(driver_gone_text(s.driver_gone, s.name)))
    if s.unsaved:
        table.add_row("models not saved", Text(unsaved_text(s.unsaved, TOP_GAPS)))
    if s.uniform_noise_floor is not None:
        table.add_row("noise floor of uniform", f"sd {s.uniform_noise_floor:.4f} across baseline seeds")
    for ref in s.references:
        table.add_row(f"reference {ref.name}", f"{ref.schedule}: {ref.val_loss:.4f}, gap {gap_report_text(ref.gap)}")
    for point in s.pareto:
        table.add_row(
            "pareto",
            ", ".join([f"number {point.number}", f"schedule {point.schedule}", *(f"{k} {v:.4g}" for k, v in point.values.items())]),
        )
    if s.infeasible or s.duplicates:
        table.add_row("infeasible / duplicates", f"{s.infeasible} below min_throughput_ratio / {s.duplicates} served from cache")
    if s.fidelity is None:
        table.add_row("rung fidelity", f"not enough complete trials (needs {MIN_CURVES} with a full learning curve)")
    for rung in s.fidelity or []:
        table.add_row(f"fidelity at {tokens_text(rung.tokens)} tokens", rung_text(rung))
    if s.pruning_from:
        table.add_row("pruning starts", pruning_text(s.pruning_from))
    for schedule, position in standing.race.standing.items() if standing and standing.race else ():
        table.add_row(f"race {schedule}", position.text())
    for number, look in enumerate(look_texts(s), 1):
        table.add_row(f"look {number}", look)
    if s.deciding:
        table.add_row("deciding costs", _cost_text(s.deciding, "this study's median run"))
    if wall_s is not None:
        table.add_row("wall time", f"{wall_s:.1f} s")
    if wall_s is not None and s.verdict.next:
        table.add_row("next", f"train the seeds that decide: {confirm_line(s.name, s.verdict.next.top, s.verdict.next.seeds)}")
    console.print(table)
    if s.confirmation:
        _print_confirmation(s.confirmation, f"confirmation of {s.name} (fresh seeds, never searched on)")
    for warning in warnings(s):
        err.print(f"warning: {warning}", highlight=False, soft_wrap=True)


def _cost_text(c: Cost, speed: str) -> str:
    """Runs, tokens and hours of training one run at a time, at the tokens/s that `speed` names."""
    from search.text import tokens_text

    text = f"{c.runs} runs, {tokens_text(c.tokens)} training tokens"
    if c.hours is None or c.tokens_per_s is None:
        return f"{text}; no tokens/s recorded, so no time"
    return f"{text}, {_hours_text(c.hours)} of training one run at a time at {c.tokens_per_s:,.0f} tokens/s ({speed})"


def _hours_text(hours: float) -> str:
    return f"{hours:,.1f} h" if hours >= 1 else f"{max(hours * 60, 1):.0f} min" if hours * 60 >= 0.5 else "under a minute"


TOP_GAPS = 5  # schedules listed in `status` by paired mean; --json has all


def _gap_row(gap) -> str:
    from search.analysis import PairedGap
    from search.text import paired_gap_text

    shown = PairedGap.of(gap.contrast, gap.adjusted_p)
    seeds = f"seed{'s' if len(gap.seeds) > 1 else ''} {', '.join(map(str, gap.seeds))}"  # which seeds, not how many
    return f"{paired_gap_text(shown)} {shown.verdict if shown.low is not None else ''} {seeds}".replace("  ", " ")


def _print_confirmation(rows, title: str) -> None:
    from search.text import paired_gap_text

    table = Table(title=title)
    for col in ("schedule", "seeds", "val loss (mean ± sd)", "gap to uniform (paired, 95% t interval)", "verdict"):
        table.add_column(col)
    for row in rows:
        loss = (
            "-"
            if row.val_loss_mean is None
            else f"{row.val_loss_mean:.4f}" + (f" ± {row.val_loss_std:.4f}" if row.val_loss_std is not None else "")
        )
        gap = row.gap
        table.add_row(row.schedule, str(row.seeds), loss, paired_gap_text(gap) if gap else "(uniform)", gap.verdict if gap else "")
    console.print(table)


@app.command()
def run(
    study_file: str = typer.Argument(..., help="study config, e.g. studies/quickstart.toml"),
    storage: str | None = StorageOpt,
    n_trials: int | None = NTrialsOpt,
    workers: int | None = WorkersOpt,
    address: str | None = AddressOpt,
    track: list[str] | None = TrackOpt,
    prior: str | None = typer.Option(None, "--prior", help="prior.json from `prism-search prior`, or `auto`: audit the trained baseline"),
) -> None:
    """Run (or continue) the study a TOML file describes."""
    from search.study import Study

    study = Study.create(study_file, storage=storage)
    _train(study, lambda progress: study.run(n_trials, workers=workers, address=address, track=track or (), prior=prior, progress=progress))


@app.command()
def resume(
    name: str = typer.Argument(..., help="study name"),
    storage: str | None = StorageOpt,
    n_trials: int | None = NTrialsOpt,
    workers: int | None = WorkersOpt,
    address: str | None = AddressOpt,
    track: list[str] | None = TrackOpt,
) -> None:
    """Continue a stored study until it has n_trials trained trials; trials lost by a dead driver, and baseline runs
    that failed for good, run again."""
    from search.study import Study

    study = Study.load(name, storage=storage)
    _train(
        study,
        lambda progress: study.resume(n_trials, workers=workers, address=address, track=track or (), progress=progress),
    )


@app.command()
def status(
    name: str | None = typer.Argument(None, help="study name (default: every study in the storage)"),
    storage: str | None = StorageOpt,
    as_json: bool = typer.Option(False, "--json", help="machine-readable output: a named study's object, else a list of every study's"),
) -> None:
    """Trials by state, best schedule, its paired gap to uniform (t interval), confirmation and rung fidelity."""
    from search.analysis import summaries
    from search.study import Study
    from search.text import summary_json

    url = storage_or_default(storage)
    # plain: another tool's, left out; damaged: a study whose own data cannot be decoded, named with why
    studies, plain, damaged = ([Study.load(name, storage=url)], [], {}) if name else Study.all(url)
    found, unreadable = ([(studies[0], studies[0].summary())], {}) if name else summaries(studies)  # unreadable: named, not fatal
    unreadable |= damaged
    if as_json:  # a named study: its one object; else a list of every study's, and each unreadable one's reason
        listed = [summary_json(s) | study.standing().to_dict() for study, s in found] + [
            {"name": n, "error": why} for n, why in unreadable.items()
        ]
        print(json_text(listed[0] if name else listed, indent=2))
        return
    if not studies and not unreadable:
        console.print(f"no prism-search studies in {mask_url(url)} yet; start one with `prism-search run STUDY.toml`", soft_wrap=True)
    for study, summary in found:
        _print_summary(summary, None, study.standing())
    for bad, why in unreadable.items():
        err.print(f"study {bad} left out: {why}", soft_wrap=True, highlight=False, markup=False)
    if plain:
        console.print(f"not created by prism-search (left out): {', '.join(plain)}", soft_wrap=True, highlight=False, markup=False)


@app.command()
def schedules(
    study_file: str = typer.Argument(..., help="study config"),
    list_all: bool = typer.Option(False, "--list", help="print every schedule of the space, one per line"),
) -> None:
    """The size of the study's schedule space and, with --list, every schedule in it."""
    config = load_config(study_file)
    family = config.family
    console.print(
        f"{family.name}: {family.size():,} schedules ({config.model.n_layer} layers, head counts {family.counts})",
        highlight=False,
    )
    if list_all:
        for schedule in family.enumerate():
            print(schedule)


@app.command()
def plan(
    study_file: str = typer.Argument(..., help="study config, e.g. studies/bench-main.toml"),
    noise_from: str | None = typer.Option(
        None, "--noise-from", help="a stored study whose paired noise to use (default: the config's own study, when stored)"
    ),
    sd: float | None = typer.Option(None, "--sd", min=0, help="the sd of one paired difference (schedule minus uniform at a seed), stated"),
    storage: str | None = typer.Option(None, "--storage", help="SQLAlchemy URL of the pilot (default: the config's storage)"),
    margin: float | None = typer.Option(None, "--margin", min=0, help="the gap to resolve (default: the config's search.margin)"),
    tokens_per_s: float | None = typer.Option(
        None, "--tokens-per-s", min=0, help="training tokens/s of one run (default: the pilot's stored runs, else timed here)"
    ),
    as_json: bool = typer.Option(False, "--json", help="machine-readable output"),
) -> None:
    """Forecast what a verdict at the margin costs (paired seeds, runs, tokens, hours) before any compute."""
    from search.study import Study
    from search.text import forecast_json

    f = Study.create(study_file, storage=storage).forecast(noise_from=noise_from, sd=sd, margin=margin, tokens_per_s=tokens_per_s)
    if as_json:
        print(json_text(forecast_json(f), indent=2))
        return
    _print_forecast(f)


def _print_forecast(f: Forecast) -> None:
    from search.analysis import NOISE_PAIRED, NOISE_STATED
    from search.text import forecast_command, method_text, tokens_text

    m = f"{f.margin:.4g}"
    then = "two confirmation rounds" if f.rounds else f"confirm the top {f.top} on fresh seeds"
    title = f"plan for {f.study} at margin {m}: search at one seed, then {then}"
    table = Table(title=title, show_header=False)
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
    table.add_row("noise", f"sd {n.sd_pair:.4f} of one paired difference: {where}")
    if f.pairs is None or f.resolution is None or f.total is None:  # never for rounds: their runs are fixed
        table.add_row("seeds", f"over 1,000 paired seeds per schedule: a margin of {m} is below what seeds resolve at this noise")
        console.print(table)
        return
    if f.rounds:
        seeds, confirm = _rounds_rows(f, f.pairs, f.resolution)
    else:
        detects = f"they detect {f.resolution:.4f} with 80% power, two-sided test at 0.05"
        seeds = f"{f.pairs} paired seeds per schedule resolve {m} ({detects})"
        each = f"{f.top} schedules and uniform x {f.pairs} fresh seeds; {f.top} is confirm's default --top"
        confirm = f"{f.confirm_runs} runs: `{forecast_command(f)}` ({each})"
    table.add_row("seeds", seeds)
    space = f"; the space holds {f.space}" if f.search_runs < f.n_trials else ""
    table.add_row("search", f"{f.search_runs} runs at the study seed (n_trials {f.n_trials}{space})")
    table.add_row("confirm", confirm)
    table.add_row("total", f"{f.total.runs} runs x {tokens_text(f.tokens_per_run)} tokens = {tokens_text(f.total.tokens)} training tokens")
    table.add_row("time", _forecast_time(f))
    if not f.rounds:
        table.add_row("left at one seed", "schedules the search trains once and confirm does not take are judged on one pair each")
    console.print(table)


def _rounds_rows(f: Forecast, pairs: int, resolution: float) -> tuple[str, str]:
    """The seeds and confirm rows of a study confirmed in rounds: its runs are fixed; what its test resolves here."""
    from search.text import confirm_line

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
    from search.analysis import SPEED_MEASURED, SPEED_STATED, SPEED_STORED

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
    text = f"{_hours_text(hours)} of training one run at a time at {s.tokens_per_s:,.0f} tokens/s ({source})"
    if f.workers > 1:
        text += f"; about {_hours_text(hours / f.workers)} on its {f.workers} workers if each keeps that speed"
    return text


@app.command()
def confirm(
    name: str = typer.Argument(..., help="study name"),
    top: int = typer.Option(5, "--top", min=1, help="how many of the best distinct schedules to re-train"),
    seeds: int = typer.Option(3, "--seeds", min=2, max=MAX_SEEDS, help="fresh seeds per schedule (the baseline gets the same ones)"),
    storage: str | None = StorageOpt,
    workers: int | None = WorkersOpt,
    address: str | None = AddressOpt,
    track: list[str] | None = TrackOpt,
) -> None:
    """Re-train the top schedules and the uniform baseline with fresh seeds; print each one's paired gap to uniform."""
    from search.cli.progress import Progress
    from search.study import Study, StudyInterrupted
    from search.text import confirm_line

    study = Study.load(name, storage=storage)
    try:
        rows = study.confirm(top, seeds, workers=workers, address=address, track=track or (), progress=Progress(console=console))
    except StudyInterrupted as interrupt:
        raise _Interrupted(
            f"interrupted: the confirmation runs finished so far are stored; run `{confirm_line(name, top, seeds)} "
            f"--storage {mask_url(study.storage)}` again to train the rest"
        ) from interrupt
    _print_confirmation(rows, f"confirmation of {name} (fresh seeds, never searched on)")


@app.command()
def delete(
    name: str = typer.Argument(..., help="study name"),
    storage: str | None = StorageOpt,
    yes: bool = typer.Option(False, "--yes", help="delete without asking (scripts)"),
) -> None:
    """Remove a study from its storage, with its folder of trial models and outputs; other studies stay."""
    from search.study import Study

    study = Study.load(name, storage=storage)
    trials = len(study.optuna_study.get_trials(deepcopy=False))  # a missing study is its one-line error here, before asking
    if not yes:
        if not sys.stdin.isatty():
            raise PrismSearchError(f"delete {name}: nobody to ask on standard input (fix: pass --yes to delete without asking)")
        if not typer.confirm(f"delete study {name!r} ({trials} trials) from {mask_url(study.storage)} and its trial folder?"):
            console.print("nothing deleted", highlight=False)
            return
    folder = study.delete()
    console.print(f"deleted study {name!r} ({trials} trials)" + (f" and {folder}" if folder else ""), soft_wrap=True, highlight=False)


@app.command()
def best(
    name: str = typer.Argument(..., help="study name"),
    storage: str | None = StorageOpt,
    as_json: bool = typer.Option(False, "--json", help="machine-readable output"),
) -> None:
    """The best feasible schedule (the Pareto front for multi-objective studies) and its gap to uniform."""
    from search.study import Study
    from search.text import best_json, gap_text, verdict_text

    s = Study.load(name, storage=storage).summary()
    if s.best_schedule is None:
        raise PrismSearchError(f"study {name!r} has no complete feasible trial yet; run or resume it")
    if as_json:
        print(best_json(s))
        return
    print(f"verdict\t{verdict_text(s.verdict, s.name)}")
    print(f"{s.best_schedule}\tval_loss {s.best_value:.4f}\tgap to uniform {gap_text(s)}")
    for point in s.pareto:
        print(
            "pareto\t" + "\t".join([f"number {point.number}", f"schedule {point.schedule}", *(f"{k} {v}" for k, v in point.values.items())])
        )


@app.command()
def export(
    name: str = typer.Argument(..., help="study name"),
    fmt: str = typer.Option("csv", "--format", help="csv or json; with --schedule: json, hf or nanogpt"),
    schedule: str | None = typer.Option(
        None, "--schedule", help="best, verdict or a trial number: that one schedule, as your own model code loads it (docs/own-model.md)"
    ),
    storage: str | None = StorageOpt,
) -> None:
    """Every finished trial as a row: objectives, metrics and one column per layer's head count; or one schedule."""
    from search.study import Study

    if schedule is None and fmt not in ("csv", "json"):
        raise PrismSearchError(f"--format {fmt!r} is not supported; use csv or json (hf and nanogpt with --schedule)")
    study = Study.load(name, storage=storage)
    text = study.export(fmt) if schedule is None else study.export_schedule(schedule, fmt)
    if schedule is not None and schedule.isdigit():  # a schedule that never finished training is no measured choice
        ended = next((row.state for row in study.trials() if row.number == int(schedule)), None)
        if ended in ("PRUNED", "FAIL"):
            err.print(f"warning: trial {schedule} ended {ended}: its schedule was not trained to the end", highlight=False)
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except OSError as e:  # `export > /dev/full`, a closed pipe: said once, and not again when Python exits
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 (stands in for the broken stdout until exit)
        raise PrismSearchError(f"export: cannot write to standard output ({e.strerror}) (fix: redirect it to a writable place)") from None


@app.command()
def train(
    schedule: str = typer.Argument(..., help="head schedule HEADSxLAYERS, e.g. 1x2,2x2; or 'uniform' (the config's baseline)"),
    config: str | None = typer.Option(
        None, "--config", help="study TOML whose [model], [train], [data] to use (default: built-in defaults)"
    ),
    corpus: str | None = typer.Option(None, "--corpus", help="built-in name, text file/folder/glob, .bin, or datasets folder"),
    tokenizer: str | None = typer.Option(None, "--tokenizer", help="bytes | bpe"),
    vocab_size: int | None = typer.Option(None, "--vocab-size", min=1, help="BPE size, or the declared vocab of token files"),
    steps: int | None = typer.Option(
        None, "--steps", min=1, help="training steps (the warmup keeps its share of the config's steps unless --warmup-steps is given)"
    ),
    warmup_steps: int | None = typer.Option(None, "--warmup-steps", min=0, help="linear learning-rate warmup steps, below --steps"),
    seed: int | None = typer.Option(
        None, "--seed", min=0, help="seed of the initial weights, data order and validation batches (default: the config's seed)"
    ),
    device: str = typer.Option("cpu", "--device", help="cpu, cuda, cuda:1, ..."),
    threads: int | None = typer.Option(
        None,
        "--threads",
        min=1,
        help="torch CPU threads (default: the config's resources.cpus_per_trial, as a study's workers use, so the run"
        " is the study's bit for bit; another count reorders float sums)",
    ),
    save: str | None = typer.Option(None, "--save", help="write the checkpoint to this directory"),
    analyze: bool = typer.Option(False, "--analyze", help="print the per-layer metrics table"),
    as_json: bool = typer.Option(False, "--json", help="print the result record as JSON"),
) -> None:
    """Train one model with one schedule and print its result record."""
    from prism import format_profile
    from search.study import SingleRun, TrainOverrides

    overrides = TrainOverrides(
        corpus=corpus, tokenizer=tokenizer, vocab_size=vocab_size, steps=steps, warmup_steps=warmup_steps, seed=seed, threads=threads
    )
    run = SingleRun.train(config, schedule, overrides, device=device, save=save, analyze=analyze)
    if as_json:
        print(json_text(run.result.to_dict(), indent=2))
    else:
        r = run.result
        table = Table(title=f"train {r.schedule}", show_header=False)
        for label, value in (
            ("final val loss", f"{r.final_val_loss:.4f}"),
            ("steps", r.steps),
            ("tokens", r.tokens),
            ("tokens/s", f"{r.tokens_per_s:,.0f}"),
            ("params", f"{r.n_params:,}"),
            ("FLOPs/token", "unknown" if r.flops_per_token is None else f"{r.flops_per_token:,}"),
            ("wall time", f"{r.wall_time_s:.1f} s"),
            ("checkpoint", r.extra.get(ATTR_CHECKPOINT) or r.extra.get(ATTR_CHECKPOINT_ERROR, "-")),
        ):
            table.add_row(label, str(value))
        console.print(table)
    if run.profile is not None:
        print(format_profile(run.profile))
    if save and (unsaved := run.result.extra.get(ATTR_CHECKPOINT_ERROR)):  # asked for a model, got only its result
        raise OutputError(f"{unsaved}; the result above is all this run kept (fix: --save to a writable folder with free space)")


@app.command()
def analyze(
    path: str = typer.Argument(..., help="checkpoint directory (prism-search train --save, or a study's), or STUDY:TRIAL, STUDY:baseline"),
    storage: str | None = StorageOpt,
) -> None:
    """Per-layer metrics table of a saved model on its corpus's validation text."""
    from prism import format_profile
    from search.study import ModelMetrics

    metrics = ModelMetrics.of(path, storage_or_default(storage))
    console.print(f"schedule {metrics.meta['schedule']} on {metrics.meta['data']['name']}", highlight=False)
    print(format_profile(metrics.layers))


@app.command()
def dashboard(
    storage: str | None = typer.Option(None, "--storage", callback=_storage_given, help=_STORAGE_HELP),
    host: str = typer.Option(
        "127.0.0.1", "--host", help="interface to bind; anything but localhost is readable by anyone who can reach it"
    ),
    port: int = typer.Option(8080, "--port", min=0, max=65535),
    stock: bool = typer.Option(
        False, "--optuna", help="serve the stock optuna-dashboard on the same storage instead (read-only: writes are refused)"
    ),
) -> None:
    """Serve a live, read-only web dashboard of the studies in a storage."""
    from search.dashboard import serve

    serve(storage_or_default(storage), host, port, stock=stock)


@app.command()
def report(
    name: str = typer.Argument(..., help="study name"),
    output: str = typer.Option("report.html", "-o", "--output", help="HTML file to write"),
    storage: str | None = typer.Option(None, "--storage", callback=_storage_given, help=_STORAGE_HELP),
) -> None:
    """Write one self-contained HTML report of a study (plotly.js embedded: opens offline)."""
    from search.dashboard import write_report

    path = write_report(storage_or_default(storage), name, output)
    console.print(
        f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB); open it in any browser, no network needed", soft_wrap=True, highlight=False
    )


@app.command()
def audit(
    source: str = typer.Argument(
        ..., help="STUDY:TRIAL, STUDY:baseline (the paired uniform baseline), a checkpoint folder, or a local Hugging Face GPT-2 folder"
    ),
    output: str = typer.Option("profile.json", "-o", "--output", help="the JSON profile"),
    html: str | None = typer.Option(None, "--html", help="the plotly report (default: the profile's name with .html)"),
    storage: str | None = StorageOpt,
) -> None:
    """Per-layer geometry of a model on fixed probe texts, and its transition zones."""
    from search.priors import write_audit

    profile, report = write_audit(source, storage_or_default(storage), output, html)
    table = Table(title=f"transition zones of {source} ({profile.schedule})")
    for col in ("depth", "from layer", "span", "strength"):
        table.add_column(col)
    for z in profile.zones:
        table.add_row(f"{z.depth:.3f}", str(z.layer), f"{z.start:.2f}-{z.end:.2f}", f"{z.strength:.3f}")
    console.print(table)
    console.print(f"profile: {output}  report: {report}")


@app.command()
def prior(
    profile_file: str = typer.Argument(..., help="a profile written by `prism-search audit`"),
    study_file: str = typer.Argument(..., help="the study config whose family the schedules must belong to"),
    output: str = typer.Option("prior.json", "-o", "--output", help="where to write the ranked schedules"),
    top: int = typer.Option(4, "--top", min=1, help="how many schedules to rank"),
) -> None:
    """Map a geometry profile to a ranked list of schedules in the study's family."""
    from search.priors import LATE_DEFAULT, ONSET_DEFAULT, write_prior

    config = load_config(study_file)
    result = write_prior(profile_file, config, top, output)
    onset = result.onset
    table = Table(
        title=f"prior for {config.name} ({config.space.family} family, baseline {result.baseline}); integration onset "
        + (f"at depth {onset.depth:.3f} (layer {onset.layer})" if onset else f"not found: default depth {ONSET_DEFAULT}")
    )
    columns = _prior_columns(LATE_DEFAULT)
    for col, _ in columns:
        table.add_column(col)
    for e in result.schedules:
        table.add_row(str(e.rank), e.schedule, e.variant, f"{e.distance:g}")
    console.print(table)
    for col, meaning in columns:
        console.print(f"{col}: {meaning}", highlight=False, soft_wrap=True)
    console.print(f"prior: {output}")


def _prior_columns(late_default: float) -> list[tuple[str, str]]:
    """The `prior` table's columns and what each means, printed under it (the rule: search/priors/mapping.py)."""
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


def _escape_help_markup(app: typer.Typer) -> None:
    """Rich reads a bracketed word such as `[model]` in a help text as a style tag and drops it: escape every
    command's and parameter's help once (shared options appear in several commands), so each prints as written."""
    import inspect

    from rich.markup import escape

    app.info.help = escape(app.info.help or "")
    seen: set[int] = set()
    for command in app.registered_commands:
        command.help = escape(command.help or inspect.getdoc(command.callback) or "")
        if command.callback is None:
            continue
        for param in inspect.signature(command.callback).parameters.values():
            info = param.default
            if isinstance(info, typer.models.ParameterInfo) and info.help and id(info) not in seen:
                seen.add(id(info))
                info.help = escape(info.help)


_escape_help_markup(app)


def main() -> None:
    if len(sys.argv) == 1:  # typer's no_args_is_help arrives as an exception: ask for the help instead
        sys.argv.append("--help")
    try:
        code = app(prog_name="prism-search", standalone_mode=False)  # returns the exit code of a typer.Exit
    except PrismSearchError as e:
        _fail(str(e))
    except _Interrupted as e:
        err.print(str(e), soft_wrap=True, highlight=False)
        sys.exit(130)
    except typer.Exit as e:
        sys.exit(e.exit_code)
    except typer.Abort:
        sys.exit(130)
    except typer.TyperException as e:  # typer's copies of click's usage errors: bad value, missing argument, unknown option
        ctx = getattr(e, "ctx", None)
        _fail(f"{e.format_message()} (fix: see `{ctx.command_path if ctx else 'prism-search'} --help`)")
    except Exception as e:  # a database that failed under the command: one line too (search.study.failures)
        from search.study import DatabaseFailure

        failure = DatabaseFailure.of(e)
        if failure is None:
            raise
        _fail(failure.text)
    if code == 130:  # typer's answer to a Ctrl-C outside a study's lifecycle (loading the config, preflight)
        err.print("interrupted before anything was stored", highlight=False)
    sys.exit(code if isinstance(code, int) else 0)


def _fail(message: str) -> NoReturn:
    """One line on stderr, exit code 2: every error the user can fix ends here."""
    err.print(f"error: {' '.join(message.split())}", highlight=False, soft_wrap=True)
    sys.exit(2)
