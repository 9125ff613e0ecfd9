"""The words for rung fidelity (search.analysis.fidelity): how well an early rung ranks runs like the end does."""

from __future__ import annotations

from search.analysis.fidelity import RELIABLE_RHO, Agreement, RungAgreement
from search.text.stats import p_text, tokens_text


def agreement_text(a: Agreement) -> str:
    where = f"within {a.groups} seeds, " if a.groups > 1 else ""
    if a.low is not None and a.high is not None:
        return f"rho {a.rho:+.2f} [{a.low:+.2f}, {a.high:+.2f}] ({where}n={a.n})"
    return f"rho {a.rho:+.2f} ({where}n={a.n}, exact permutation p={p_text(a.p)})"


def rung_text(rung: RungAgreement) -> str:
    cut = {True: "kept", False: "would have been CUT", None: "has no curve here"}[rung.best_kept]
    return f"{agreement_text(rung.agreement)}; a 1/{rung.reduction_factor} cut per seed: the best by mean ({rung.best}) {cut}"


def rung_warning(rung: RungAgreement) -> str | None:
    """Why pruning at this rung is unreliable, or None when it is reliable."""
    if rung.reliable:
        return None
    why = []
    if not rung.agreement.reliably_high:
        a = rung.agreement
        shown = f"interval down to {a.low:+.2f}" if a.low is not None else f"rho {a.rho:+.2f}, permutation p={p_text(a.p)}"
        why.append(f"within-seed rank agreement with the final loss is not shown to reach {RELIABLE_RHO} ({shown})")
    if rung.best_kept is False:
        why.append(f"the best schedule by mean ({rung.best}) would have been pruned")
    return f"pruning at {tokens_text(rung.tokens)} tokens is unreliable: {' and '.join(why)}"
