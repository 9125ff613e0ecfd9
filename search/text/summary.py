"""The words for a study's Summary (search.analysis.summary): its best schedule, its gap, what failed, what to do."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict

from prism.data import CorpusFacts
from search.analysis import Forecast, PairedGap, Summary
from search.analysis.rounds import N_ROUNDS, Rounds, RoundsProgress
from search.analysis.summary import DriverGone, FailedRun, GapReport, NotFinite, PruningStart, Unsaved
from search.outputs import jsonout
from search.text.commands import confirm_line, resume_line
from search.text.fidelity import agreement_text, rung_warning
from search.text.sequential import look_text
from search.text.stats import paired_gap_text, tokens_text
from search.text.verdict import method_text, verdict_json, verdict_text

LOOKS_DECIDE = "the pre-registered test decides at its looks"


def confirm_command(s: Summary) -> str:
    """What measures the best's noise: confirmation seeds, or an experiment's own next pairs."""
    if s.is_experiment:
        return resume_line(s.name)
    step = s.verdict.next
    return confirm_line(s.name, step.top, step.seeds) if step else confirm_line(s.name, 1, 3)  # one command everywhere


def forecast_command(f: Forecast) -> str | None:
    """What trains a forecast's confirmation: its `top` schedules and uniform on `pairs` fresh seeds (None for a study
    confirmed in rounds: `run` trains them)."""
    return None if f.pairs is None or f.rounds else confirm_line(f.study, f.top, f.pairs)


def best_label(s: Summary) -> str:
    """What `best_schedule` is called ("best schedule", "best val loss"): an experiment's was fixed before its
    data, not picked by its mean."""
    return "challenger" if s.is_experiment else "best"


def best_how(s: Summary) -> str:
    """How `best_schedule` was chosen, with its seeds."""
    seeds = len(s.best_seeds)
    if s.is_experiment:
        return f"pre-registered, {seeds} paired seed{'s' if seeds != 1 else ''}"
    how = "the verdict's" if s.verdict.kind == "better" else "by paired mean"
    return how + (f", {seeds} seeds" if seeds > 1 else "")


def gap_report_text(report: GapReport, next_step: str = "", judged: bool = True) -> str:
    """A schedule's gap: on the seeds it was not selected on first when the search selected it, then over all its
    seeds. `judged=False`: no better/worse word (an experiment's gap between its looks, which only the looks judge)."""

    def said(gap: PairedGap) -> str:
        return paired_gap_text(gap, next_step) + (f" {gap.verdict}" if judged and gap.low is not None else "")

    picked = f", selected as best of {report.selected_from} schedules" if report.selected_from else ""
    if report.unselected is not None:
        over = f"; all {report.all_seeds.n} seeds {report.all_seeds.mean:+.4f}" if report.all_seeds else ""
        return f"on seeds it was not selected on {said(report.unselected)}{over}{picked}"
    if report.all_seeds is None:
        return "n/a"
    return f"{said(report.all_seeds)}{picked}"


def gap_text(s: Summary) -> str:
    """The best's gap; when uniform is the best, saying "+0.0000 against itself" would hide the answer, so the text
    says uniform won and gives the best other schedule's gap."""
    if s.uniform_is_best and s.runner_up is None:
        return "none yet: uniform is the only schedule finished"
    if s.is_experiment and s.best_gap:  # read between looks at 95%, it must not pass for the test
        gap = f"{gap_report_text(s.best_gap, judged=False)}; every pair so far at 95%, for reading only: {LOOKS_DECIDE}"
    else:
        gap = gap_report_text(s.best_gap, confirm_command(s)) if s.best_gap else "n/a"
    if s.uniform_is_best:
        return f"none: uniform is the best schedule by paired mean; the best other, {s.runner_up}: {gap}"
    return gap


def corpus_text(c: CorpusFacts) -> str:
    """What the corpus a command trains on holds, said before it trains."""
    if c.train_tokens is None or c.val_tokens is None:
        return f"corpus {c.name}: a generated task, vocab {c.vocab_size}"
    read = "memory-mapped, read a batch at a time" if c.mapped else "in memory"
    return (
        f"corpus {c.name}: {tokens_text(c.train_tokens)} training and {tokens_text(c.val_tokens)} validation tokens, "
        f"vocab {c.vocab_size} ({read})"
    )


def seeds_text(seeds: Sequence[int]) -> str:
    """ "seed 1000" or "seeds 1001-1004" (the rounds' seeds are consecutive)."""
    return f"seed {seeds[0]}" if len(seeds) == 1 else f"seeds {seeds[0]}-{seeds[-1]}"


def round_started_text(number: int, rounds: Rounds, seeds: Sequence[int]) -> str:
    """What a confirmation round trains, as `run` starts it."""
    what = ", ".join(rounds.contenders) if number == 1 else f"{rounds.pick} (frozen)"
    return f"confirmation round {number} of {N_ROUNDS}: {what} and uniform at {seeds_text(seeds)}"


def search_after_rounds_text(rounds: Rounds) -> str:
    """Said as a search goes on past the schedules its rounds froze: what it adds is ranked, never confirmed."""
    frozen = f"{rounds.pick} (the pick)" if rounds.pick else ", ".join(rounds.contenders) + " (round 1's contenders)"
    return (
        f"confirmation rounds: {frozen} frozen before this search went on; the schedules it adds are ranked but never "
        "confirmed, and only the pick can be called better (a study runs its rounds once: a new study confirms its own)"
    )


def round_skipped_text(number: int) -> str:
    return f"confirmation round {number} of {N_ROUNDS}: no finished schedule besides uniform to confirm; rounds skipped"


def rounds_text(r: RoundsProgress) -> str:
    """Where a study confirmed in rounds stands: "confirmation round k of n" while a round is under way."""
    pick = r.rounds.pick
    if r.number == 0:
        return (
            f"after the search: round 1 of {N_ROUNDS} trains its best schedules and uniform on a fresh seed, round 2 the pick on new seeds"
        )
    if r.over:
        return f"both rounds over: {pick} frozen after round 1, judged on {seeds_text(r.seeds)} alone"
    if r.number == 1:
        what = ", ".join(r.rounds.contenders) or "its best schedules (chosen when the round starts)"
        return f"confirmation round 1 of {N_ROUNDS}: {what} and uniform on {seeds_text(r.seeds)}, {r.finished} of {r.planned} runs finished"
    what = f"{pick} (frozen)" if pick else "the best of round 1 (frozen when the round starts)"
    return (
        f"confirmation round 2 of {N_ROUNDS}: {what} and uniform on {seeds_text(r.seeds)}, {r.finished} of {r.planned} runs "
        "finished; only these seeds can call it better"
    )


def _error(run: FailedRun) -> str:
    return run.error if run.error is not None else "no error recorded"


def failed_text(s: Summary) -> str:
    """The baseline and reference runs that failed for good, and what to do: run and resume leave them failed
    (search.study.create)."""
    runs = "; ".join(f"{r.role} {r.schedule} seed {r.seed} (trial {r.number}: {_error(r)})" for r in s.failed_runs)
    return (
        f"{runs}; not queued again by `run`: `{resume_line(s.name)}` "
        "queues them once more (a divergence repeats: that needs a new study with other train settings)"
    )


STATUS_ERROR_CHARS = 160  # a failed trial's error in `status`: its end, where the trainer's last line is


def failed_trial_text(run: FailedRun) -> str:
    """One line: the error's end (the whole is on the dashboard's trial page and in the report)."""
    error = _error(run)
    short = error if len(error) <= STATUS_ERROR_CHARS else "…" + error[-(STATUS_ERROR_CHARS - 1) :]
    return f"trial {run.number} {run.schedule} seed {run.seed}: {short}"


def not_finite_text(rows: list[NotFinite]) -> str:
    said = (
        f"trial {r.number} ({'?' if r.schedule is None else r.schedule} seed {'?' if r.seed is None else r.seed}): "
        + ", ".join(f"{name} {v}" for name, v in r.values.items())
        for r in rows
    )
    return "; ".join(said) + ": failed runs for the statistics, in no mean or gap"


def driver_gone_text(gone: DriverGone, name: str) -> str:
    why = f"its driver (pid {gone.pid}) has ended" if gone.pid is not None else "its driver sent no heartbeat within the grace period"
    numbers, them = ", ".join(map(str, gone.numbers)), "them" if len(gone.numbers) > 1 else "it"
    return (
        f"trial{'s' if len(gone.numbers) > 1 else ''} {numbers} RUNNING, but {why}: nothing trains {them}; "
        f"`{resume_line(name)}` runs {them} again"
    )


def unsaved_text(rows: list[Unsaved], shown: int) -> str:
    """The first `shown` of them, and how many more `status --json` lists."""
    more = f"; and {len(rows) - shown} more (`status --json`)" if len(rows) > shown else ""
    return "; ".join(f"trial {u.number}: {u.error}" for u in rows[:shown]) + more + " (their results are stored)"


def crossed_text(s: Summary) -> str:
    pairs = s.crossed_pairs
    listed = ", ".join(f"{schedule} seed {seed}" for schedule, seed in pairs)
    without = verdict_text(s.verdict_one_kind, s.name) if s.verdict_one_kind else "n/a"
    return f"{len(pairs)} pair{'s' if len(pairs) > 1 else ''} ({listed}) ran on two kinds of hardware; without them: {without}"


def pruning_text(start: PruningStart) -> str:
    if start.rung is None:
        return f"not yet: no rung ranks reliably in the {start.n_curves} complete curves, so trials run to the end"
    tokens = start.rung.tokens
    return (
        f"from {tokens_text(tokens)} tokens ({tokens / start.budget_tokens:.0%} of the budget): from there on "
        f"{agreement_text(start.rung.agreement)} and the best by mean survives a 1/{start.reduction_factor} cut per seed"
    )


def look_texts(s: Summary) -> list[str]:
    """A pre-registered experiment's looks read so far, one line each."""
    return [look_text(look, s.plan) for look in s.looks or []] if s.plan else []


def fidelity_warnings(s: Summary) -> list[str]:
    return [w for r in s.fidelity or [] if (w := rung_warning(r))]


def warnings(s: Summary) -> list[str]:
    """Everything `status` and the dashboard warn about: unreliable rungs, trials left out, and seeds whose runs
    were trained on mixed hardware, where the same (schedule, seed) does not repeat bit for bit (docs/results.md), so
    a pair across kinds is not exact. Seeds each on one kind are exact pairs, whichever kind each seed had."""
    out = fidelity_warnings(s)
    out += [f"trial {n} left out: {why} (changed outside prism-search)" for n, why in s.left_out.items()]
    if s.mixed_seeds:
        seeds = ", ".join(map(str, s.mixed_seeds))
        out.append(
            f"at seed{'s' if len(s.mixed_seeds) > 1 else ''} {seeds} the runs were trained on more than one kind of hardware "
            f"({', '.join(s.kernels)} in the study): the same run differs across kinds, so paired gaps there carry that "
            "difference too; keep the runs of a seed on one kind"
        )
    return out


def summary_json(s: Summary) -> dict:
    """`status --json`'s object for the study: every field, and the words the table shows beside them."""
    said = {
        "method": method_text(s.method),
        "verdict": verdict_json(s.verdict, s.name),
        "verdict_one_kind": verdict_json(s.verdict_one_kind, s.name) if s.verdict_one_kind else None,
    }
    words = {"gap_text": gap_text(s), "look_texts": look_texts(s), "fidelity_warnings": fidelity_warnings(s), "warnings": warnings(s)}
    return asdict(s) | said | words


def best_json(s: Summary) -> str:
    """What `best` prints, for `best --json`: the verdict, the best schedule with its value and gap, the front;
    valid JSON (search.outputs.jsonout: a non-finite value is null)."""
    full = summary_json(s)
    keys = ("verdict", "best_schedule", "best_value", "best_seeds", "best_number", "baseline_schedule", "baseline_value")
    best = {"study": s.name} | {k: full[k] for k in keys} | {"gap_text": full["gap_text"], "pareto": full["pareto"]}
    return jsonout.dumps(best, indent=2)


def forecast_json(f: Forecast) -> dict:
    """`plan --json`: every field of the forecast, how its noise was fitted in words, and the confirm command."""
    noise = asdict(f.noise) | {"method": method_text(f.noise.method)}
    return asdict(f) | {"noise": noise, "confirm_command": forecast_command(f)}
