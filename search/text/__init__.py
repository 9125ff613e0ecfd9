"""The words for what search.analysis returns: what `status`, `best`, the dashboard and the report print.

Analysis returns typed values; the English, and the command to run next, are written here once for every display,
so the CLI and the dashboard say the same thing.
"""

from search.text.commands import confirm_line, resume_line
from search.text.fidelity import agreement_text, rung_text, rung_warning
from search.text.sequential import look_text, plan_text, state_text
from search.text.stats import p_text, paired_gap_text, tokens_text
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
    "agreement_text",
    "best_how",
    "best_json",
    "best_label",
    "confirm_command",
    "confirm_line",
    "corpus_text",
    "crossed_text",
    "driver_gone_text",
    "failed_text",
    "failed_trial_text",
    "fidelity_warnings",
    "forecast_command",
    "forecast_json",
    "gap_report_text",
    "gap_text",
    "look_text",
    "look_texts",
    "method_text",
    "not_finite_text",
    "p_text",
    "paired_gap_text",
    "plan_text",
    "pruning_text",
    "reason_text",
    "resume_line",
    "round_skipped_text",
    "round_started_text",
    "rounds_text",
    "rung_text",
    "rung_warning",
    "state_text",
    "summary_json",
    "tokens_text",
    "unsaved_text",
    "verdict_json",
    "verdict_text",
    "warnings",
]
