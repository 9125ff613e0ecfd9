"""Analysis: what a study's stored trials show. Summaries and verdicts (`status`, `best`, the dashboard, the report),
the statistics behind them, the budget count (how far a study is), and finding stored studies. It reads storage
and never writes: the CLI, the dashboard, the study and the runner all read a study through it, so they agree.
"""

from search.analysis.budget import Budget
from search.analysis.forecast import NOISE_PAIRED, NOISE_STATED, NOISE_UNIFORM, SPEED_MEASURED, SPEED_STATED, SPEED_STORED, Cost, Forecast
from search.analysis.stats import MIN_CURVES, PairedGap
from search.analysis.stored import stored_studies, stored_study, summaries, unreadable_studies
from search.analysis.summary import Summary, summarize

__all__ = [
    "MIN_CURVES",
    "NOISE_PAIRED",
    "NOISE_STATED",
    "NOISE_UNIFORM",
    "SPEED_MEASURED",
    "SPEED_STATED",
    "SPEED_STORED",
    "Budget",
    "Cost",
    "Forecast",
    "PairedGap",
    "Summary",
    "stored_studies",
    "stored_study",
    "summaries",
    "summarize",
    "unreadable_studies",
]
