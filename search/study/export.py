"""Export a study's finished trials as flat rows: one column per layer's head count, CSV or JSON."""

from __future__ import annotations

import csv
import io

import optuna

from search.analysis.rows import finished_rows
from search.attrs import SCHEDULE
from search.config import StudyConfig
from search.errors import PrismSearchError
from search.outputs import jsonout


def rows(study: optuna.Study, config: StudyConfig) -> list[dict]:
    """Every finished trial of `study` (whose config is `config`) as one flat row (search.analysis.rows.TrialRow.columns)."""
    return [row.columns(config.model.n_layer) for row in finished_rows(study, config)]


# what makes a spreadsheet read a cell as a formula (OWASP's CSV injection guidance): a stored schedule, role or
# reference name `=HYPERLINK(...)` would run when the export is opened
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def render(study: optuna.Study, config: StudyConfig, fmt: str) -> str:
    data = rows(study, config)
    if fmt == "json":
        return jsonout.dumps(data, indent=2)
    header = list(data[0]) if data else ["number"]
    return "".join(_csv_line(values) for values in [header, *([_cell(row[key]) for key in header] for row in data)])


def _csv_line(values: list) -> str:
    """One CSV record ending in a bare newline. The writer quotes a cell holding a character of its line terminator
    only: written with "\r\n", a carriage return inside a stored name is quoted, not read as a row's end."""
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\r\n").writerow(values)
    return buffer.getvalue()[:-2] + "\n"


def _cell(value: object) -> object:
    """Text a spreadsheet would run, behind a quote (shown as text, never evaluated); numbers stay numbers, -0.01 too."""
    return f"'{value}" if isinstance(value, str) and value.startswith(FORMULA_STARTS) else value


SCHEDULE_FORMATS = ("json", "hf", "nanogpt")


def chosen_schedule(study: optuna.Study, config: StudyConfig, which: str) -> tuple[str, str]:
    """(schedule, what chose it) for `export --schedule`: `best` (lowest mean val loss, as `status` names it),
    `verdict` (the schedule the verdict found better than uniform; uniform itself when none was) or a trial number."""
    from search.analysis import summarize
    from search.text import best_how, verdict_text

    if which.isdigit():
        trials = {t.number: t for t in study.get_trials(deepcopy=False)}
        if int(which) not in trials or SCHEDULE not in trials[int(which)].user_attrs:
            raise PrismSearchError(f"--schedule {which}: study {study.study_name!r} has no trial {which} with a schedule")
        return trials[int(which)].user_attrs[SCHEDULE], f"trial {which}"
    summary = summarize(study, config)
    if which == "best":
        if summary.best_schedule is None:
            raise PrismSearchError(f"--schedule best: study {study.study_name!r} has no finished trial yet")
        return summary.best_schedule, f"best ({best_how(summary)})"
    if which == "verdict":
        verdict = summary.verdict
        if verdict.kind == "better" and verdict.schedule:
            return verdict.schedule, f"verdict: {verdict_text(verdict, summary.name)}"
        return summary.baseline_schedule, f"verdict: {verdict_text(verdict, summary.name)} (no schedule beat uniform: the uniform baseline)"
    raise PrismSearchError(f"--schedule {which!r}: use best, verdict or a trial number")


def render_schedule(study: optuna.Study, config: StudyConfig, which: str, fmt: str) -> str:
    """The chosen schedule as another codebase loads it: per-layer head counts and head dims with d_model (json),
    an HF-style config fragment with OpenELM's per-layer `num_query_heads` (hf), or the nanoGPT schedule file that
    examples/own_trainer/train_gpt.py reads with --schedule-file (docs/own-model.md: a per-layer head list)."""
    from prism import Schedule

    if fmt not in SCHEDULE_FORMATS:
        raise PrismSearchError(f"--format {fmt!r} is not a schedule format; use {', '.join(SCHEDULE_FORMATS)}")
    text, source = chosen_schedule(study, config, which)
    schedule = Schedule.parse(text)
    heads, dims, d_model = list(schedule.heads), list(schedule.head_dims(config.model.d_model)), config.model.d_model
    if fmt == "json":
        data = {"study": study.study_name, "source": source, "schedule": text, "d_model": d_model, "n_layer": len(heads)}
        data |= {"n_head": heads, "head_dim": dims}
    elif fmt == "hf":  # OpenELM's names; q, k and v keep one head count per layer (no grouped keys and values)
        data = {"num_transformer_layers": len(heads), "model_dim": d_model, "num_query_heads": heads, "num_kv_heads": heads}
        data |= {"head_dim": dims}
    else:
        data = {"n_layer": len(heads), "n_embd": d_model, "n_head": heads}
    return jsonout.dumps(data, indent=2) + "\n"
