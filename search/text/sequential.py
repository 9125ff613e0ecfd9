"""The words for a pre-registered experiment (search.analysis.sequential): its plan, each look, where it stands."""

from __future__ import annotations

from search.analysis.sequential import Look, Plan, State
from search.text.stats import p_text


def plan_text(plan: Plan) -> str:
    looks = "/".join(map(str, plan.looks))
    return (
        f"{plan.schedule} against {plan.uniform} on paired seeds from {plan.first_seed}, looks at {looks} pairs, "
        f"margin {plan.margin:.4g}, alpha {plan.alpha:.4g} split over {len(plan.looks)} looks ({plan.alpha_per_look:.4g} each)"
    )


def look_text(look: Look, plan: Plan) -> str:
    lo, hi = look.interval
    return (
        f"{look.pairs} pairs: {look.contrast.mean:+.4f} [{lo:+.4f}, {hi:+.4f}] ({look.level:.2%} interval), "
        f"difference p={p_text(look.p_difference)}, equivalence at ±{plan.margin:.4g} p={p_text(look.p_equivalence)}, "
        f"resolution {look.resolution:.4f}: {look.outcome}"
    )


def state_text(now: State) -> str:
    if now.outcome == "running":
        upcoming = next(n for n in now.plan.looks if n > now.pairs)
        return f"running: {now.pairs} of {upcoming} pairs to the next look ({plan_text(now.plan)})"
    look = now.looks[-1]
    return f"{look.outcome} at {look.pairs} pairs ({plan_text(now.plan)})"
