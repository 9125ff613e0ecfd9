"""Analysis: what a study's stored trials show. Summaries and verdicts (`status`, `best`, the dashboard, the report),
the statistics behind them, and the budget count (how far a study is). It reads storage and never writes: the
CLI, the dashboard, the study and the runner all read a study through it, so they agree.
"""

from search.analysis.budget import Budget
from search.analysis.summary import Summary, summarize

__all__ = ["Budget", "Summary", "summarize"]
