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

from search.attrs import ATTR_CHECKPOINT_ERROR
from search.config import DEFAULT_STORAGE, MAX_SEEDS, STORAGE_ENV, storage_or_default
from search.errors import OutputError, PrismSearchError
from search.outputs.jsonout import dumps as json_text

if TYPE_CHECKING:
    from search.analysis import Summary
    from search.study import Standing, Study, StudyProgress
    from search.text import Sheet

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Search per-layer attention head schedules.")
# markup off: every string printed holds user text (study and reference names, schedules, errors), and rich would
# read `[/x]` in a reference name as a tag and crash; the CLI styles nothing by markup
console = Console(markup=False)
err = Console(stderr=True, markup=False)


def _storage_given(url: str | None) -> str | None:
    """`--storage ""` (an unset shell variable) would read or write the default database unnoticed."""
    if url is not None and not url.strip():
        from search.text import empty_storage_text  # search.text loads the analysis: only when it is needed

        raise typer.BadParameter(empty_storage_text(DEFAULT_STORAGE))
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
    from search.text import run_interrupted_text

    try:
        summary = train(Progress(console=console))
    except StudyInterrupted as interrupt:
        raise _Interrupted(run_interrupted_text(study.name, study.config if interrupt.stored else None)) from interrupt
    _print_summary(summary, study.wall_s, study.standing())


def _print_summary(s: Summary, wall_s: float | None, standing: Standing | None = None) -> None:
    """The verdict first, then the study table (the schedules' gaps to uniform, references, rung fidelity, where
    the policies stand), the confirmation table and the warnings."""
    from search.text import confirmation_sheet, status_line, status_sheet, warnings

    console.print(status_line(s), highlight=False, soft_wrap=True)
    stopped = standing.stopped.text() if standing and standing.stopped else None
    race = {schedule: position.text() for schedule, position in standing.race.standing.items()} if standing and standing.race else {}
    _draw(status_sheet(s, wall_s, stopped, race))
    if s.confirmation:
        _draw(confirmation_sheet(s.name, s.confirmation))
    for warning in warnings(s):
        err.print(f"warning: {warning}", highlight=False, soft_wrap=True)


def _draw(sheet: Sheet) -> None:
    """A search.text sheet as a rich table, then its notes."""
    table = Table(title=sheet.title, show_header=bool(sheet.columns))
    for column in sheet.columns:
        table.add_column(column)
    for row in sheet.rows:
        table.add_row(*row)
    console.print(table)
    for note in sheet.notes:
        console.print(note, highlight=False, soft_wrap=True)


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
    from search.text import left_out_text, no_studies_text, not_ours_text, summary_json

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
        console.print(no_studies_text(url), soft_wrap=True)
    for study, summary in found:
        _print_summary(summary, None, study.standing())
    for bad, why in unreadable.items():
        err.print(left_out_text(bad, why), soft_wrap=True, highlight=False, markup=False)
    if plain:
        console.print(not_ours_text(plain), soft_wrap=True, highlight=False, markup=False)


@app.command()
def schedules(
    study_file: str = typer.Argument(..., help="study config"),
    list_all: bool = typer.Option(False, "--list", help="print every schedule of the space, one per line"),
) -> None:
    """The size of the study's schedule space and, with --list, every schedule in it."""
    from search.study import Study
    from search.text import space_text

    config = Study.create(study_file).config
    console.print(space_text(config), highlight=False)
    if list_all:
        for schedule in config.family.enumerate():
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
    from search.text import forecast_json, forecast_sheet

    f = Study.create(study_file, storage=storage).forecast(noise_from=noise_from, sd=sd, margin=margin, tokens_per_s=tokens_per_s)
    if as_json:
        print(json_text(forecast_json(f), indent=2))
        return
    _draw(forecast_sheet(f))


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
    from search.text import confirm_interrupted_text, confirmation_sheet

    study = Study.load(name, storage=storage)
    try:
        rows = study.confirm(top, seeds, workers=workers, address=address, track=track or (), progress=Progress(console=console))
    except StudyInterrupted as interrupt:
        raise _Interrupted(confirm_interrupted_text(name, top, seeds, study.storage)) from interrupt
    _draw(confirmation_sheet(name, rows))


@app.command()
def delete(
    name: str = typer.Argument(..., help="study name"),
    storage: str | None = StorageOpt,
    yes: bool = typer.Option(False, "--yes", help="delete without asking (scripts)"),
) -> None:
    """Remove a study from its storage, with its folder of trial models and outputs; other studies stay."""
    from search.study import Study
    from search.text import NOTHING_DELETED, delete_question, deleted_text, nobody_to_ask_text

    study = Study.load(name, storage=storage)
    trials = len(study.optuna_study.get_trials(deepcopy=False))  # a missing study is its one-line error here, before asking
    if not yes:
        if not sys.stdin.isatty():
            raise PrismSearchError(nobody_to_ask_text(name))
        if not typer.confirm(delete_question(name, trials, study.storage)):
            console.print(NOTHING_DELETED, highlight=False)
            return
    folder = study.delete()
    console.print(deleted_text(name, trials, folder), soft_wrap=True, highlight=False)


@app.command()
def best(
    name: str = typer.Argument(..., help="study name"),
    storage: str | None = StorageOpt,
    as_json: bool = typer.Option(False, "--json", help="machine-readable output"),
) -> None:
    """The best feasible schedule (the Pareto front for multi-objective studies) and its gap to uniform."""
    from search.study import Study
    from search.text import best_json, best_lines, no_best_yet_text

    s = Study.load(name, storage=storage).summary()
    if s.best_schedule is None:
        raise PrismSearchError(no_best_yet_text(name))
    if as_json:
        print(best_json(s))
        return
    for line in best_lines(s):
        print(line)


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
    from search.text import stdout_unwritable_text, unfinished_text, unknown_format_text

    if schedule is None and fmt not in ("csv", "json"):
        raise PrismSearchError(unknown_format_text(fmt))
    study = Study.load(name, storage=storage)
    text = study.export(fmt) if schedule is None else study.export_schedule(schedule, fmt)
    if schedule is not None and schedule.isdigit():  # a schedule that never finished training is no measured choice
        ended = next((row.state for row in study.trials() if row.number == int(schedule)), None)
        if ended in ("PRUNED", "FAIL"):
            err.print(unfinished_text(schedule, ended), highlight=False)
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except OSError as e:  # `export > /dev/full`, a closed pipe: said once, and not again when Python exits
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 (stands in for the broken stdout until exit)
        raise PrismSearchError(stdout_unwritable_text(e.strerror)) from None


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
    from search.text import train_sheet, unsaved_model_text

    overrides = TrainOverrides(
        corpus=corpus, tokenizer=tokenizer, vocab_size=vocab_size, steps=steps, warmup_steps=warmup_steps, seed=seed, threads=threads
    )
    run = SingleRun.train(config, schedule, overrides, device=device, save=save, analyze=analyze)
    if as_json:
        print(json_text(run.result.to_dict(), indent=2))
    else:
        _draw(train_sheet(run.result))
    if run.profile is not None:
        print(format_profile(run.profile))
    if save and (unsaved := run.result.extra.get(ATTR_CHECKPOINT_ERROR)):  # asked for a model, got only its result
        raise OutputError(unsaved_model_text(unsaved))


@app.command()
def analyze(
    path: str = typer.Argument(..., help="checkpoint directory (prism-search train --save, or a study's), or STUDY:TRIAL, STUDY:baseline"),
    storage: str | None = StorageOpt,
) -> None:
    """Per-layer metrics table of a saved model on its corpus's validation text."""
    from prism import format_profile
    from search.study import ModelMetrics
    from search.text import measured_text

    metrics = ModelMetrics.of(path, storage_or_default(storage))
    console.print(measured_text(metrics.meta["schedule"], metrics.meta["data"]["name"]), highlight=False)
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
    from search.text import report_text

    path = write_report(storage_or_default(storage), name, output)
    console.print(report_text(path, path.stat().st_size), soft_wrap=True, highlight=False)


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
    from search.text import audit_files_text, audit_sheet

    profile, report = write_audit(source, storage_or_default(storage), output, html)
    _draw(audit_sheet(source, profile.schedule, [(z.depth, z.layer, z.start, z.end, z.strength) for z in profile.zones]))
    console.print(audit_files_text(output, report))


@app.command()
def prior(
    profile_file: str = typer.Argument(..., help="a profile written by `prism-search audit`"),
    study_file: str = typer.Argument(..., help="the study config whose family the schedules must belong to"),
    output: str = typer.Option("prior.json", "-o", "--output", help="where to write the ranked schedules"),
    top: int = typer.Option(4, "--top", min=1, help="how many schedules to rank"),
) -> None:
    """Map a geometry profile to a ranked list of schedules in the study's family."""
    from search.priors import LATE_DEFAULT, ONSET_DEFAULT, write_prior
    from search.study import Study
    from search.text import prior_file_text, prior_sheet

    result = write_prior(profile_file, Study.create(study_file).config, top, output)
    onset = (result.onset.depth, result.onset.layer) if result.onset else None
    ranked = [(e.rank, e.schedule, e.variant, e.distance) for e in result.schedules]
    _draw(prior_sheet(result.study, result.family, result.baseline, onset, (ONSET_DEFAULT, LATE_DEFAULT), ranked))
    console.print(prior_file_text(output))


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
        from search.text import NOTHING_STORED

        err.print(NOTHING_STORED, highlight=False)
    sys.exit(code if isinstance(code, int) else 0)


def _fail(message: str) -> NoReturn:
    """One line on stderr, exit code 2: every error the user can fix ends here."""
    err.print(f"error: {' '.join(message.split())}", highlight=False, soft_wrap=True)
    sys.exit(2)
