"""The words for what search.analysis returns: what `status`, `best`, the dashboard and the report print.

Analysis returns typed values; the English, and the command to run next, are written here once for every display,
so the CLI and the dashboard say the same thing.
"""

from search.text.commands import confirm_line, resume_line
from search.text.fidelity import agreement_text, rung_text, rung_warning
from search.text.interrupts import NOTHING_STORED, confirm_interrupted_text, run_interrupted_text
from search.text.plan import cost_text, forecast_sheet, hours_text
from search.text.priors import audit_files_text, audit_sheet, prior_file_text, prior_sheet
from search.text.sequential import look_text, plan_text, state_text
from search.text.sheet import Sheet
from search.text.single import measured_text, train_sheet
from search.text.space import space_text
from search.text.stats import p_text, paired_gap_text, tokens_text
from search.text.status import (
    best_lines,
    confirmation_sheet,
    left_out_text,
    no_studies_text,
    not_ours_text,
    status_line,
    status_sheet,
)
from search.text.stored import NOTHING_DELETED, delete_question, deleted_text, report_text, unfinished_text
from search.text.summary import (
    best_how,
    best_json,
    best_label,
    confirm_command,
    corpus_text,
    crossed_text,
    driver_gone_text,
    failed_text,
    failed_trial_text,
    fidelity_warnings,
    forecast_command,
    forecast_json,
    gap_report_text,
    gap_text,
    look_texts,
    not_finite_text,
    pruning_text,
    round_skipped_text,
    round_started_text,
    rounds_text,
    summary_json,
    unsaved_text,
    warnings,
)
from search.text.verdict import method_text, reason_text, verdict_json, verdict_text

__all__ = [
    "NOTHING_DELETED",
    "NOTHING_STORED",
    "Sheet",
    "agreement_text",
    "audit_files_text",
    "audit_sheet",
    "best_how",
    "best_json",
    "best_label",
    "best_lines",
    "confirm_command",
    "confirm_interrupted_text",
    "confirm_line",
    "confirmation_sheet",
    "corpus_text",
    "cost_text",
    "crossed_text",
    "delete_question",
    "deleted_text",
    "driver_gone_text",
    "failed_text",
    "failed_trial_text",
    "fidelity_warnings",
    "forecast_command",
    "forecast_json",
    "forecast_sheet",
    "gap_report_text",
    "gap_text",
    "hours_text",
    "left_out_text",
    "look_text",
    "look_texts",
    "measured_text",
    "method_text",
    "no_studies_text",
    "not_finite_text",
    "not_ours_text",
    "p_text",
    "paired_gap_text",
    "plan_text",
    "prior_file_text",
    "prior_sheet",
    "pruning_text",
    "reason_text",
    "report_text",
    "resume_line",
    "round_skipped_text",
    "round_started_text",
    "rounds_text",
    "run_interrupted_text",
    "rung_text",
    "rung_warning",
    "space_text",
    "state_text",
    "status_line",
    "status_sheet",
    "summary_json",
    "tokens_text",
    "train_sheet",
    "unfinished_text",
    "unsaved_text",
    "verdict_json",
    "verdict_text",
    "warnings",
]
