"""How fragile the pre-registered result is: its pairs read through the product's own code, then what one pair, the
rank test and the machines do to it (docs/results.md, answer 4).

    .venv/bin/python scripts/prereg_fragility.py        # reads docs/results/prereg.db and docs/results/bench.db

Prints, for the pre-registered experiment (studies/prereg-long.toml): every pair's gap with the kernels its two runs
recorded; the paired t at the last look (search.analysis.stats); each one-pair deletion's paired t p and TOST p, the
range, and how many deletions leave it undecided at the look's alpha; the exact Wilcoxon signed-rank p on all pairs
(scipy); a one-way ANOVA of the gaps over the machines (all, and the AVX512 ones alone); and the margin rationale:
bench-main's sd of one paired difference (the blocked model) and the paired seeds that resolve the margin at it
(search.analysis.stats.pairs_needed). Both databases are opened read-only.
"""

from __future__ import annotations

import argparse
import contextlib
import sqlite3
import statistics
import tempfile
from pathlib import Path

from scipy import stats

from search.analysis import stored_study
from search.analysis.blocked import many_to_one
from search.analysis.sequential import plan_of
from search.analysis.stats import paired_contrast, pairs_needed
from search.analysis.summary import study_runs
from search.attrs import SEED, WORKER
from search.storage.records import stored_config
from search.text import method_text, p_text, plan_text

# The machines as docs/results.md lists them, by the seeds each trained: the trials record each run's kernels, but
# not the machine (every host is named "vm"), so the sessions come from that record and are checked against the kernels.
MACHINES = {1: range(2000, 2003), 2: range(2003, 2006), 3: range(2006, 2012), 4: range(2012, 2017), 5: range(2017, 2020)}


def read_only(db: Path, scratch: Path) -> str:
    """The URL of a copy of `db` (SQLite's online backup, read-only at the source): a reader must never change the
    committed database."""
    copy = scratch / db.name
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as src, contextlib.closing(sqlite3.connect(copy)) as dst:
        src.backup(dst)
    return f"sqlite:///{copy}"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--db", default="docs/results/prereg.db")
    p.add_argument("--bench", default="docs/results/bench.db", help="the database whose bench-main noise sets the margin")
    p.add_argument("--study", default="prereg-long")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        report(args, Path(scratch))


def report(args: argparse.Namespace, scratch: Path) -> None:
    study = stored_study(args.study, read_only(Path(args.db), scratch))
    config = stored_config(study)
    plan = plan_of(config)
    assert plan is not None, f"{args.study} is not a pre-registered experiment"
    trials = study.get_trials(deepcopy=False)
    runs = study_runs(trials, config)
    seeds = [s for s in plan.seeds if (plan.schedule, s) in runs and (plan.uniform, s) in runs]
    gap = {s: runs[(plan.schedule, s)] - runs[(plan.uniform, s)] for s in seeds}
    kernels: dict[int, set[str]] = {}
    for t in trials:
        if t.state.name == "COMPLETE" and (kind := (t.user_attrs.get(WORKER) or {}).get("kernels")):
            kernels.setdefault(t.user_attrs[SEED], set()).add(kind)
    kind = {s: "/".join(sorted(kernels.get(s, {"not recorded"}))) for s in seeds}
    machine = {s: m for m, members in MACHINES.items() for s in members}
    alpha = plan.alpha_per_look
    print(f"{args.study}: {plan_text(plan)}; {len(seeds)} pairs, alpha per look {alpha:.4g}")
    for m, members in MACHINES.items():
        kinds = sorted({kind[s] for s in members if s in gap})
        print(f"  machine {m}: seeds {members.start}-{members.stop - 1}, kernels {', '.join(kinds)}")
        assert len(kinds) == 1, f"machine {m} ran on more than one kind of kernels: {kinds}"
    for s in seeds:
        print(f"  seed {s} (machine {machine[s]}, {kind[s]}): gap {gap[s]:+.4f}")

    diffs = [gap[s] for s in seeds]
    full = paired_contrast(diffs)
    assert full is not None
    lo, hi = full.interval(1 - alpha)
    print(
        f"\nlast look, {full.n} pairs: gap {full.mean:+.4f}, {1 - alpha:.2%} interval [{lo:+.4f}, {hi:+.4f}], paired t p = {full.p:.4f} "
        f"({'below' if full.p < alpha else 'not below'} {alpha:.4g}), TOST at ±{plan.margin:g} p = {full.tost(plan.margin):.3f}"
    )
    print("\none-pair deletions (paired t on the other pairs):")
    deleted = {}
    for s in seeds:
        c = paired_contrast([gap[o] for o in seeds if o != s])
        assert c is not None
        deleted[s] = c
        # the plan's order: equivalence is named first when both tests reject (search.analysis.sequential)
        decided = "equivalent" if c.tost(plan.margin) < alpha else ("better" if c.mean < 0 else "worse") if c.p < alpha else "undecided"
        print(f"  without seed {s} ({kind[s]}): gap {c.mean:+.4f}, p = {c.p:.4f}, TOST p = {c.tost(plan.margin):.3f}: {decided}")
    ps = [c.p for c in deleted.values()]
    lost = [s for s, c in deleted.items() if c.p >= alpha]
    equivalent = [s for s in lost if deleted[s].tost(plan.margin) < alpha]
    print(
        f"  p ranges {min(ps):.4f}-{max(ps):.4f}; {len(lost)} of {len(seeds)} deletions leave no difference shown at {alpha:.4g} "
        f"({len(lost) - len(equivalent)} undecided, {len(equivalent)} equivalent by TOST): "
        + ", ".join(f"seed {s} ({kind[s]})" for s in lost)
    )

    wilcoxon = stats.wilcoxon(diffs, method="exact")
    print(f"\nexact Wilcoxon signed-rank on all {len(diffs)} pairs: statistic {wilcoxon.statistic:g}, p = {wilcoxon.pvalue:.4f}")

    groups = {m: [gap[s] for s in members if s in gap] for m, members in MACHINES.items()}
    every = stats.f_oneway(*groups.values())
    avx512 = {m: g for m, g in groups.items() if all(kind[s] == "cpu AVX512" for s in MACHINES[m] if s in gap)}
    only = stats.f_oneway(*avx512.values())
    for m, g in groups.items():
        print(f"  machine {m}: {len(g)} pairs, mean gap {statistics.fmean(g):+.4f}")
    print(f"one-way ANOVA of the gaps over the {len(groups)} machines: F = {every.statistic:.2f}, p = {every.pvalue:.3f}")
    names = ", ".join(map(str, avx512))
    print(f"the same over the {len(avx512)} AVX512 machines ({names}): F = {only.statistic:.2f}, p = {only.pvalue:.3f}")
    rest = [gap[s] for s in seeds if kind[s] == "cpu AVX512"]
    c = paired_contrast(rest)
    assert c is not None
    print(f"the AVX512 pairs alone: {c.n} pairs, gap {c.mean:+.4f}, paired t p = {p_text(c.p)}")

    bench = stored_study("bench-main", read_only(Path(args.bench), scratch))
    bench_config = stored_config(bench)
    family = many_to_one(study_runs(bench.get_trials(deepcopy=False), bench_config), str(bench_config.baseline))
    assert family.sd_pair is not None
    margin = bench_config.search.margin
    print(
        f"\nmargin rationale: bench-main's sd of one paired difference {family.sd_pair:.4f} ({method_text(family.method)}); "
        f"{pairs_needed(family.sd_pair, margin)} paired seeds resolve {margin:g} at it (pairs_needed: 80% power, 0.05 two-sided); "
        f"at the experiment's own pairs (sd {statistics.stdev(diffs):.4f}): {pairs_needed(statistics.stdev(diffs), margin)}"
    )


if __name__ == "__main__":
    main()
