"""The words for the statistics' numbers (search.analysis.stats): a paired gap with its interval and p-values, and
token counts as people say them."""

from __future__ import annotations

from search.analysis.stats import PairedGap


def p_text(p: float | None) -> str:
    """A p-value to two significant figures; below 0.001 only its bound (more digits claim a precision it lacks)."""
    if p is None:
        return "n/a"
    return f"{p:.2g}" if p >= 0.001 else "<0.001"


def paired_gap_text(gap: PairedGap, next_step: str = "") -> str:
    """`next_step`: the command that measures the noise, named while it is not measured."""
    if gap.low is None:
        run = f"; run `{next_step}`" if next_step else ""
        return f"{gap.mean:+.4f} (n={gap.n}: noise not measured yet{run})"
    adjusted = f", adjusted p={p_text(gap.adjusted_p)}" if gap.adjusted_p is not None else ""
    return f"{gap.mean:+.4f} [{gap.low:+.4f}, {gap.high:+.4f}] (n={gap.n}, p={p_text(gap.p)}{adjusted})"


def tokens_text(tokens: float) -> str:
    """205k, 1.2M: token counts as people say them."""
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(tokens) >= scale:
            return f"{tokens / scale:.3g}{unit}"
    return f"{tokens:.0f}"
