"""The many-to-one family on constructed data, checked against statsmodels' OLS of the same blocked model."""

import numpy as np
import pytest

from search.analysis.blocked import many_to_one

UNIFORM = "2x6"


def _runs(effects: dict[str, float], seeds: list[int], seed_effect: float = 0.05, noise: float = 0.004, rng_seed: int = 0):
    rng = np.random.default_rng(rng_seed)
    luck = {s: seed_effect * rng.standard_normal() for s in seeds}
    return {(name, s): 2.0 + effect + luck[s] + noise * rng.standard_normal() for name, effect in effects.items() for s in seeds}


def test_contrasts_and_errors_are_the_blocked_ols_of_statsmodels():
    import pandas as pd
    import statsmodels.formula.api as smf

    runs = _runs({UNIFORM: 0.0, "a": 0.0, "b": 0.01, "c": 0.03}, [0, 1, 2, 3])
    del runs[("c", 3)]  # unbalanced: one schedule missed a seed
    family = many_to_one(runs, UNIFORM)
    frame = pd.DataFrame([(s, seed, y) for (s, seed), y in runs.items()], columns=["schedule", "seed", "y"])
    fit = smf.ols(f"y ~ C(schedule, Treatment('{UNIFORM}')) + C(seed)", data=frame).fit()
    assert family.residual_df == fit.df_resid == 15 - 7
    for name in ("a", "b", "c"):
        term = f"C(schedule, Treatment('{UNIFORM}'))[T.{name}]"
        gap = family.gap(name)
        assert gap.contrast.mean == pytest.approx(fit.params[term], abs=1e-12)
        assert gap.contrast.se == pytest.approx(fit.bse[term], rel=1e-9)
        assert gap.contrast.p == pytest.approx(fit.pvalues[term], rel=1e-6)
    assert family.gap("c").seeds == (0, 1, 2)


def test_seed_effects_cancel_and_many_to_one_is_holm_corrected():
    """Huge seed effects (a lucky or unlucky uniform run moves every gap at its seed) do not hide a planted 0.03
    gap once seeds are blocks; ten null schedules stay inside the noise after Holm."""
    effects = {UNIFORM: 0.0, "worse": 0.03} | {f"null{k}": 0.0 for k in range(10)}
    family = many_to_one(_runs(effects, [0, 1, 2], seed_effect=0.2), UNIFORM)
    assert family.method.startswith("blocked model") and family.residual_df == 22
    worse = family.gap("worse")
    assert worse.contrast.mean == pytest.approx(0.03, abs=0.01) and worse.adjusted_p < 0.05
    assert all(g.adjusted_p >= 0.05 for g in family.gaps if g.schedule.startswith("null"))
    assert family.gaps[-1].schedule == "worse"  # ranked by paired mean, best first


def test_one_seed_each_falls_back_to_paired_t_with_no_noise_measured():
    family = many_to_one({(UNIFORM, 0): 2.0, ("a", 0): 1.99, ("b", 0): 2.01}, UNIFORM)
    assert family.residual_df is None and family.sd_pair is None
    assert [g.schedule for g in family.gaps] == ["a", "b"] and not family.gaps[0].contrast.measured
    assert family.gaps[0].adjusted_p is None
