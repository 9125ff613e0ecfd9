"""Regenerate the tables and figures of docs/results.md from the committed benchmark database (no training).

    .venv/bin/python scripts/results.py                  # reads docs/results/bench.db, writes docs/results/
    .venv/bin/python scripts/results.py --db other.db --out /tmp/results

Writes `tables.md` (every table, with the command that made it) and PNG figures next to it. Works on a partial
database too: a stage that has not run yet is reported as pending, so the analysis can be read while the
studies run (scripts/run_benchmarks.sh). The statistics are the product's own (search/analysis/): each study's verdict
as `status` prints it, gaps to uniform from the blocked model (schedule + seed) with Holm-adjusted p-values, rank
agreement within seeds (bootstrap intervals, or exact permutation p-values below 10 points).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sqlite3
import statistics
import tempfile
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import optuna
from optuna.trial import TrialState

from prism import Schedule
from search.analysis.blocked import many_to_one
from search.analysis.fidelity import Curve, rank_agreement, rung_fidelity
from search.analysis.stats import PairedGap, paired_gap
from search.analysis.summary import Summary, summarize
from search.text import agreement_text, paired_gap_text, tokens_text, verdict_text

MAIN, LONG, WIDTH, FREE = "bench-main", "bench-long", "bench-width", "bench-free"
COMMAND = "python scripts/results.py"


@dataclass
class Run:
    """One trained (schedule, seed): its final val loss, its learning curve (tokens -> val loss), its speed."""

    schedule: str
    seed: int
    role: str
    final: float
    curve: dict[int, float]
    throughput_ratio: float | None
    tokens_per_s: float | None


@dataclass
class Study:
    name: str
    baseline: str
    seed: int
    reduction_factor: int
    summary: Summary
    runs: list[Run] = field(default_factory=list)

    def by_schedule(self) -> dict[str, dict[int, Run]]:
        out: dict[str, dict[int, Run]] = defaultdict(dict)
        for r in self.runs:
            out[r.schedule][r.seed] = r
        return out


def load(db: Path) -> dict[str, Study]:
    """Every prism-search study in the file, read from a temporary copy (reading must never change the file). The copy
    is SQLite's online backup, not a file copy: while a benchmark runs, its newest trials sit in the -wal file beside
    the database, which a copy of the file alone would miss."""
    from search.storage.records import stored_config

    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "bench.db"
        with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as src, contextlib.closing(sqlite3.connect(copy)) as dst:
            src.backup(dst)
        storage = optuna.storages.RDBStorage(f"sqlite:///{copy}")
        studies = {}
        for summary in optuna.get_all_study_summaries(storage):
            study = optuna.load_study(study_name=summary.study_name, storage=storage)
            config = stored_config(study)
            s = Study(study.study_name, str(config.baseline), config.seed, config.search.reduction_factor, summarize(study))
            seen = set()
            for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
                key = (t.user_attrs["schedule"], t.user_attrs.get("seed", config.seed))
                if key in seen:  # the duplicate cache serves a stored run again: count it once
                    continue
                seen.add(key)
                s.runs.append(
                    Run(
                        key[0],
                        key[1],
                        t.user_attrs.get("role", "search"),
                        t.values[0],
                        dict(t.intermediate_values),
                        t.user_attrs.get("throughput_ratio"),
                        t.user_attrs.get("tokens_per_s"),
                    )
                )
            studies[s.name] = s
        storage.engine.dispose()
    return studies


def gaps(study: Study, schedule: str, seeds: set[int] | None = None) -> PairedGap | None:
    """Gap of `schedule` to the study's uniform baseline in the many-to-one family over `seeds` (default: all): the
    blocked model's contrast and its Holm-adjusted p once schedules have two seeds, else the paired t."""
    runs = {(name, seed): run.final for name, by_seed in study.by_schedule().items() for seed, run in by_seed.items()}
    family = many_to_one({k: v for k, v in runs.items() if seeds is None or k[1] in seeds}, study.baseline)
    gap = family.gap(schedule)
    return None if gap is None else PairedGap.of(gap.contrast, gap.adjusted_p)


def verdicts(studies: dict[str, Study]) -> str:
    """Each study's verdict, method and resolution, exactly as `prism-search status` prints them."""
    lines = []
    for name, study in studies.items():
        v = study.summary.verdict
        lines.append(f"- **{name}**: {verdict_text(v, study.summary.name)}")
    return "\n".join(lines)


def table_main(study: Study) -> tuple[str, list[tuple[str, float]]]:
    """Every schedule: seeds, mean ± sd, paired gap with interval and p, tokens/s ratio, the gap at each seed; ranked
    by mean."""
    rows = []
    by_schedule = study.by_schedule()
    for schedule, runs in by_schedule.items():
        finals = [r.final for r in runs.values()]
        ratios = [r.throughput_ratio for r in runs.values() if r.throughput_ratio]
        rows.append(
            (
                statistics.fmean(finals),
                schedule,
                len(finals),
                statistics.stdev(finals) if len(finals) > 1 else None,
                gaps(study, schedule),
                statistics.median(ratios) if ratios else None,
            )
        )
    rows.sort()
    lines = [
        "| rank | schedule | seeds | val loss mean ± sd | gap to uniform [95% interval] (n, p, Holm-adjusted p) | verdict | tokens/s ratio "
        "| gap at each seed |",
        "|---:|---|---:|---|---|---|---:|---|",
    ]
    for rank, (mean, schedule, n, sd, gap, ratio) in enumerate(rows, 1):
        mark = " (uniform)" if schedule == study.baseline else ""
        sd_text = f" ± {sd:.4f}" if sd is not None else ""
        gap_text = "-" if schedule == study.baseline or gap is None else paired_gap_text(gap)
        verdict = "-" if schedule == study.baseline or gap is None else gap.verdict
        at_seeds = [(seed, _gap_at(by_schedule, schedule, study.baseline, seed)) for seed in sorted(by_schedule[schedule])]
        per_seed = ", ".join(f"{seed}: {g:+.4f}" for seed, g in at_seeds if g is not None) if schedule != study.baseline else "-"
        lines.append(
            f"| {rank} | `{schedule}`{mark} | {n} | {mean:.4f}{sd_text} | {gap_text} | {verdict} | {f'{ratio:.3f}' if ratio else '-'} "
            f"| {per_seed or '-'} |"
        )
    return "\n".join(lines), [(schedule, mean) for mean, schedule, *_ in rows]


def selection(study: Study) -> str:
    """The winner's curse, corrected: pick the best on the search seed alone, judge it on the other seeds only."""
    runs = study.by_schedule()
    at_seed = {s: r[study.seed].final for s, r in runs.items() if study.seed in r and s != study.baseline}
    if not at_seed:
        return "pending: no schedule finished at the search seed yet"
    best = min(at_seed, key=at_seed.__getitem__)
    on_search = gaps(study, best, {study.seed})
    fresh = gaps(study, best, set(runs[best]) - {study.seed})
    n = len(at_seed)
    lines = [
        f"- selected: `{best}`, best of {n} schedules at the search seed {study.seed}: gap there "
        f"{paired_gap_text(on_search) if on_search else '-'} (biased: selected on this very number)"
    ]
    lines.append(
        f"- the same schedule on the seeds it was not selected on: "
        f"{paired_gap_text(fresh) if fresh else 'pending (no fresh seed yet)'}" + (f", verdict: **{fresh.verdict}**" if fresh else "")
    )
    return "\n".join(lines)


def rung_table(study: Study) -> tuple[str, list]:
    """Rank agreement of each rung with the final loss within seeds, and whether the best schedule by mean survives
    a 1/eta cut at each seed it ran: the product's own measure (`status`, the dashboard)."""
    curves = [Curve(r.schedule, r.seed, r.curve, r.final) for r in study.runs if r.curve]
    last = max((max(c.points) for c in curves), default=0)
    full = [c for c in curves if max(c.points) == last]
    agreement = rung_fidelity(full, study.reduction_factor, study.summary.best_schedule)
    if agreement is None:
        return "pending: fewer than 4 complete learning curves", []
    lines = [
        "| tokens | within-seed Spearman rho with the final loss | runs | seeds | best by mean under a 1/η cut per seed |",
        "|---:|---|---:|---:|---|",
    ]
    for a in agreement:
        kept = {True: "kept", False: "**cut**", None: "no curve"}[a.best_kept]
        lines.append(
            f"| {tokens_text(a.tokens)} | {agreement_text(a.agreement)} | {a.agreement.n} | {a.agreement.groups} | `{a.best}` {kept} |"
        )
    return "\n".join(lines), agreement


def transfer(main: Study, other: Study | None, what: str) -> str:
    """Spearman between the schedules' mean final loss in the main study and in `other` (a longer or wider run)."""
    if other is None:
        return f"pending: study {what} has not run yet"
    a, b = main.by_schedule(), other.by_schedule()
    common = sorted(set(a) & set(b))
    if len(common) < 3:
        return f"pending: {len(common)} schedules in common so far (need 3)"
    x = [statistics.fmean(r.final for r in a[s].values()) for s in common]
    y = [statistics.fmean(r.final for r in b[s].values()) for s in common]
    rank = rank_agreement([(x, y)])
    order = sorted(common, key=lambda s: y[common.index(s)])
    shown = agreement_text(rank) if rank else "no ranking (a side is constant)"
    return f"Spearman {shown} over {len(common)} schedules; order in {other.name}: " + ", ".join(f"`{s}`" for s in order)


def later_stage(main: Study, other: Study | None, what: str) -> str:
    """A later stage: its rank agreement with bench-main, its own ranked table and its own rung agreement."""
    if other is None:
        return f"pending: study {what} has not run yet"
    return (
        f"{transfer(main, other, what)}\n\n{table_main(other)[0]}\n\nRank agreement per rung inside {other.name}:\n\n{rung_table(other)[0]}"
    )


def transfer_figure(main: Study, others: list[Study], out: Path) -> list[str]:
    """Each later stage's paired gaps to uniform against bench-main's, per schedule (mean and every seed)."""
    others = [o for o in others if len(set(main.by_schedule()) & set(o.by_schedule()) - {o.baseline}) >= 2]
    if not others:
        return []
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(others), figsize=(4.2 * len(others), 4), squeeze=False)
    for ax, other in zip(axes[0], others):
        runs = other.by_schedule()
        for schedule in sorted((set(main.by_schedule()) & set(runs)) - {other.baseline}):
            x = gaps(main, schedule).mean
            per_seed = [d for d in (_gap_at(runs, schedule, other.baseline, seed) for seed in runs[schedule]) if d is not None]
            ax.plot([x] * len(per_seed), per_seed, ".", color="grey", alpha=0.6)
            ax.plot([x], [statistics.fmean(per_seed)], "o", color="black")
            ax.annotate(schedule, (x, statistics.fmean(per_seed)), fontsize=6, xytext=(3, 3), textcoords="offset points")
        ax.axhline(0, color="grey", lw=0.8)
        ax.axvline(0, color="grey", lw=0.8)
        ax.set_xlabel(f"gap to uniform in {main.name} (mean of paired seeds)")
        ax.set_ylabel(f"gap to uniform in {other.name}")
        ax.set_title(f"{main.name} -> {other.name} (grey: single seeds)", fontsize=9)
    fig.tight_layout()
    fig.savefig(out / "transfer.png", dpi=110)
    plt.close(fig)
    return ["transfer.png"]


def monotone(main: Study, free: Study | None) -> str:
    """Are the best schedules monotone? The free search's winner is selected at the search seed (like `selection`)
    and judged on its fresh seeds, against uniform and against bench-main's best non-uniform monotone schedule.

    Both studies train the same model on the same data with the same seeds, so a (schedule, seed) in both is the
    same run: that is checked, not assumed. The cross-study gap is a difference of the two studies' paired gaps
    (each schedule minus its own study's uniform at the same seed), which stays paired even if a rerun differed.
    """
    if free is None:
        return f"pending: study {FREE} has not run yet"
    runs, main_runs = free.by_schedule(), main.by_schedule()
    at_seed = {s: r[free.seed].final for s, r in runs.items() if free.seed in r and s != free.baseline}
    if not at_seed:
        return "pending: no schedule finished yet"
    best = min(at_seed, key=at_seed.__getitem__)
    fresh = set(runs[best]) - {free.seed}
    n_mono = sum(_is_monotone(s) for s in runs)
    own = gaps(free, best, fresh) if fresh else None
    lines = [
        f"- selected: `{best}` ({'monotone' if _is_monotone(best) else 'not monotone'}), best of {len(at_seed)} schedules "
        f"at the search seed {free.seed}; {n_mono} of the {len(runs)} schedules {FREE} trained are monotone",
        "- its gap to uniform on the seeds it was not selected on: "
        + (f"{paired_gap_text(own)}, verdict: **{own.verdict}**" if own else "pending (no fresh seed yet)"),
    ]
    shared = [(s, seed, main_runs[s][seed], r) for s, by in runs.items() for seed, r in sorted(by.items()) if seed in main_runs.get(s, {})]
    if shared:
        largest = max(abs(m.final - f.final) for *_, m, f in shared)
        same = "identical: the studies share their runs" if largest == 0 else "not identical: only gaps within a study are paired"
        lines.append(f"- runs in both {FREE} and {MAIN} (same schedule and seed): {len(shared)}, largest difference {largest:.1e} ({same})")
        lines += [
            f"  - `{s}` seed {seed}: {MAIN} {m.final:.6f} ({_speed(m)}), {FREE} {f.final:.6f} ({_speed(f)})" for s, seed, m, f in shared
        ]
    main_best = next((s for s, _ in table_main(main)[1] if s != main.baseline), None)
    if main_best is not None:
        pairs = [(_gap_at(runs, best, free.baseline, seed), _gap_at(main_runs, main_best, main.baseline, seed)) for seed in sorted(fresh)]
        cross = paired_gap([a - b for a, b in pairs if a is not None and b is not None])
        lines.append(
            f"- `{best}` minus {MAIN}'s best non-uniform monotone schedule `{main_best}` on the fresh seeds (difference of "
            "the paired gaps to uniform): "
            + (f"{paired_gap_text(cross)}, verdict: **{cross.verdict}**" if cross else "pending (no common fresh seed)")
        )
    if main.seed == free.seed:  # one ranking at the shared search seed: every schedule either study trained there
        pooled = sorted(
            [(r[free.seed].final, s) for s, r in runs.items() if free.seed in r]
            + [(r[main.seed].final, s) for s, r in main_runs.items() if main.seed in r and s not in runs]
        )
        lines.append(
            f"- both studies at seed {free.seed}: {len(pooled)} distinct schedules, {sum(_is_monotone(s) for _, s in pooled)} monotone; "
            "the best ten: " + ", ".join(f"`{s}` {v:.4f}{'' if _is_monotone(s) else ' (not monotone)'}" for v, s in pooled[:10])
        )
    return "\n".join(lines)


def _is_monotone(schedule: str) -> bool:
    return Schedule.parse(schedule).is_monotone


def _speed(run: Run) -> str:
    return f"{run.tokens_per_s:,.0f} tokens/s" if run.tokens_per_s else "tokens/s not recorded"


def _gap_at(runs: dict[str, dict[int, Run]], schedule: str, baseline: str, seed: int) -> float | None:
    """schedule - baseline at one seed, or None where either did not run."""
    if seed in runs.get(schedule, {}) and seed in runs.get(baseline, {}):
        return runs[schedule][seed].final - runs[baseline][seed].final
    return None


def _pyplot():
    """matplotlib's pyplot on the file-only Agg backend, imported only when a figure is drawn."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def attention(path: Path, out: Path) -> tuple[str, list[str]]:
    """Mean attention distance per layer of the schedules scripts/attention_profiles.py measured (a JSON beside the db)."""
    if not path.is_file():
        return f"pending: no {path.name} yet (scripts/attention_profiles.py writes it)", []
    table = json.loads(path.read_text())
    n_layer = max(len(v["layers"]) for v in table.values())
    lines = [
        "| schedule | val loss | " + " | ".join(f"layer {i}" for i in range(n_layer)) + " |",
        "|---|---:|" + "---:|" * n_layer,
    ]
    for schedule, v in table.items():
        cells = " | ".join(f"{m['mad']:.1f} ({m['mad_relative']:.2f})" for m in v["layers"])
        lines.append(f"| `{schedule}` (seed {v['seed']}) | {v['val_loss']:.4f} | {cells} |")
    plt = _pyplot()

    fig, ax = plt.subplots(figsize=(5, 3))
    for schedule, v in table.items():
        ax.plot([m["layer"] for m in v["layers"]], [m["mad"] for m in v["layers"]], "o-", label=schedule)
    ax.set_xlabel("layer")
    ax.set_ylabel("mean attention distance (tokens)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "attention.png", dpi=110)
    plt.close(fig)
    note = "cells: mean attention distance in tokens (relative to the query position in brackets), mean over the layer's heads"
    return "\n".join(lines) + f"\n\n{note}", ["attention.png"]


def figures(study: Study, ranking: list[tuple[str, float]], agreement: list, out: Path) -> list[str]:
    plt = _pyplot()

    written = []
    rows = [(s, gaps(study, s)) for s, _ in ranking if s != study.baseline]
    rows = [(s, g) for s, g in rows if g is not None]
    if rows:
        fig, ax = plt.subplots(figsize=(7, 0.28 * len(rows) + 1.2))
        for i, (_, g) in enumerate(rows):
            ax.plot([g.mean], [i], "o", color="black")
            if g.low is not None:
                ax.plot([g.low, g.high], [i, i], color="tab:blue")
        ax.axvline(0, color="grey", lw=0.8)
        ax.set_yticks(range(len(rows)), [s for s, _ in rows], fontsize=7)
        ax.invert_yaxis()
        ax.set_xlabel("val loss gap to uniform (paired by seed; bar: 95% t interval)")
        ax.set_title(f"{study.name}: every schedule vs uniform {study.baseline}", fontsize=9)
        fig.tight_layout()
        fig.savefig(out / "gaps.png", dpi=110)
        written.append("gaps.png")
    if agreement:
        fig, ax = plt.subplots(figsize=(5, 3))
        x = [a.tokens / 1e6 for a in agreement]
        rank = [a.agreement for a in agreement]
        ax.errorbar(
            x,
            [r.rho for r in rank],
            fmt="o-",
            yerr=[[r.rho - r.low if r.low is not None else 0 for r in rank], [r.high - r.rho if r.high is not None else 0 for r in rank]],
        )
        ax.axhline(0.5, color="grey", ls="--", lw=0.8)
        ax.set_xlabel("training tokens (M)")
        ax.set_ylabel("within-seed Spearman rho with final loss")
        ax.set_title(f"{study.name}: rank agreement per rung", fontsize=9)
        fig.tight_layout()
        fig.savefig(out / "rungs.png", dpi=110)
        written.append("rungs.png")
    plt.close("all")
    return written


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--db", default="docs/results/bench.db")
    p.add_argument("--out", default="docs/results")
    args = p.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    studies = load(Path(args.db))
    main_study = studies.get(MAIN)
    if main_study is None:
        raise SystemExit(f"{args.db} has no study {MAIN!r}; run scripts/run_benchmarks.sh first")
    table, ranking = table_main(main_study)
    rungs, agreement = rung_table(main_study)
    names = [s for s, _ in ranking]
    where = {name: names.index(name) + 1 for name in names}
    reference = next((r.schedule for r in main_study.runs if r.role == "reference"), None)
    sections = [
        f"<!-- generated by `{COMMAND}` from {args.db}; do not edit by hand -->",
        f"## Verdicts (margin and method as `prism-search status` prints them)\n\n{verdicts(studies)}",
        f"## {MAIN}: every schedule ({len(names)} so far), ranked by mean val loss\n\n{table}",
        f"Uniform `{main_study.baseline}` ranks {where.get(main_study.baseline, '-')} of {len(names)}"
        + (f"; the paper ramp `{reference}` ranks {where.get(reference, '-')}." if reference else "."),
        f"## Selection-corrected best\n\n{selection(main_study)}",
        f"## Rank agreement per rung (within seeds, all complete runs of {MAIN})\n\n{rungs}",
        f"## Across budget (1x -> 4x)\n\n{later_stage(main_study, studies.get(LONG), LONG)}",
        f"## Across width (d_model 128 -> 256)\n\n{later_stage(main_study, studies.get(WIDTH), WIDTH)}",
        f"## Monotone or not ({FREE})\n\n{monotone(main_study, studies.get(FREE))}",
    ]
    attention_text, attention_figures = attention(Path(args.db).with_name("attention.json"), out)
    sections.append(f"## Attention distance per layer\n\n{attention_text}")
    later = [studies[name] for name in (LONG, WIDTH) if name in studies]
    pictures = figures(main_study, ranking, agreement, out) + transfer_figure(main_study, later, out) + attention_figures
    sections.append("Figures: " + ", ".join(f"[{f}]({f})" for f in pictures))
    (out / "tables.md").write_text("\n\n".join(sections) + "\n")
    print("\n\n".join(sections))


if __name__ == "__main__":
    main()
