"""The words for what search.analysis returns: what `status`, `best`, the dashboard and the report print.

Analysis returns typed values; the English, and the command to run next, are written here once for every display,
so the CLI and the dashboard say the same thing.
"""

from search.text.fidelity import agreement_text, rung_text, rung_warning
from search.text.stats import paired_gap_text
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

__all__ = [
    "agreement_text",
    "best_how",
    "best_json",
    "best_label",
    "confirm_command",
    "corpus_text",
    "crossed_text",
    "driver_gone_text",
    "failed_text",
    "failed_trial_text",
    "fidelity_warnings",
    "forecast_command",
    "gap_report_text",
    "gap_text",
    "look_texts",
    "not_finite_text",
    "paired_gap_text",
    "pruning_text",
    "round_skipped_text",
    "round_started_text",
    "rounds_text",
    "rung_text",
    "rung_warning",
    "summary_json",
    "unsaved_text",
    "warnings",
]
