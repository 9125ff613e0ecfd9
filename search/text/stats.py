"""The words for a paired gap (search.analysis.stats.PairedGap): its mean, interval and p-values."""

from __future__ import annotations

from search.analysis.stats import PairedGap, p_text


def paired_gap_text(gap: PairedGap, next_step: str = "") -> str:
    """`next_step`: the command that measures the noise, named while it is not measured."""
    if gap.low is None:
        run = f"; run `{next_step}`" if next_step else ""
        return f"{gap.mean:+.4f} (n={gap.n}: noise not measured yet{run})"
    adjusted = f", adjusted p={p_text(gap.adjusted_p)}" if gap.adjusted_p is not None else ""
    return f"{gap.mean:+.4f} [{gap.low:+.4f}, {gap.high:+.4f}] (n={gap.n}, p={p_text(gap.p)}{adjusted})"
