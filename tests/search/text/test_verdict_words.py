"""The words of a verdict (search.text.verdict): its line, how its test was made, why it is undecided, its JSON."""

from search.analysis.blocked import Fit
from search.analysis.sequential import Plan, state
from search.analysis.stats import Contrast
from search.analysis.verdict import Confirm, FrozenTest, Open, Uncompared, Verdict, experiment_verdict
from search.text import method_text, plan_text, reason_text, verdict_json, verdict_text

BLOCKED = Fit(6, 3, False)  # "blocked model (schedule + seed), 6 df, Holm over 3"
PAIRED = Fit(None, 2, False)  # "paired t per schedule, Holm over 2"
OPEN = Open("a", Contrast(2, -0.01, None, 1), 2)  # two seeds: noise not measured


def test_each_way_a_test_was_made_reads_word_for_word():
    assert method_text(BLOCKED) == "blocked model (schedule + seed), 6 df, Holm over 3"
    assert method_text(Fit(6, 3, True)) == (
        "blocked model (schedule + seed), 6 df, Holm over 3; ranked by gaps shrunk by their noise (empirical Bayes)"
    )
    assert method_text(PAIRED) == "paired t per schedule, Holm over 2"
    assert method_text(Fit(None, 2, True)) == "paired t per schedule, Holm over 2; ranked by gaps shrunk by their noise (empirical Bayes)"
    assert method_text(Fit(None, 0, True)) == "paired t per schedule; none has two paired seeds yet, so none is tested"
    assert method_text(FrozenTest(4, 22)) == (
        "frozen after confirmation round 1, tested on its 4 round-2 seeds alone: blocked model (schedule + seed) over every run, "
        "22 df, Holm over 1"
    )
    plan = Plan("2x3,4x3", "2x6", 2000, (4, 6, 8), margin=0.01)
    assert method_text(plan) == f"pre-registered: {plan_text(plan)}" and method_text(None) == ""


def test_each_reason_reads_word_for_word():
    assert reason_text(Verdict("undecided", 0.01, reason=Uncompared())) == "no schedule has been compared with uniform yet"
    assert reason_text(Verdict("undecided", 0.01, reason=OPEN)) == (
        "best other schedule by mean a -0.0100 on 2 seeds, noise not measured; 2 schedules may still beat uniform by 0.01 or more"
    )
    measured = Open("b", Contrast(1, -0.02, 0.005, 6), 1, sd_beyond=0.0123)
    lo, hi = measured.contrast.interval()
    assert reason_text(Verdict("undecided", 0.005, reason=measured)) == (
        f"best other schedule by mean b -0.0200 [{lo:+.4f}, {hi:+.4f}] on 1 seed; 1 schedule may still beat uniform by 0.005 or more "
        "(the margin is below what seeds resolve at paired sd 0.0123)"
    )
    assert reason_text(Verdict("equivalent", 0.01)) == ""  # a search that ends equivalent found nothing else


def test_each_kind_of_verdict_reads_word_for_word():
    better = Verdict("better", 0.01, "a", -0.0123, (-0.02, -0.0046), 0.0031, 0.0062, (1, 2, 3), BLOCKED)
    assert verdict_text(better, "s") == (
        "better: a beats uniform by -0.0123 [-0.0200, -0.0046] on 3 seeds it was not selected on (adjusted p=0.0031; "
        "blocked model (schedule + seed), 6 df, Holm over 3); resolution 0.0062 (80% power)"
    )
    worse = Verdict("worse", 0.01, "b", 0.0123, (0.0046, 0.02), 0.0031, None, (1, 2), PAIRED)
    assert verdict_text(worse, "s") == (
        "worse: b loses to uniform by +0.0123 [+0.0046, +0.0200] on 2 seeds (p=0.0031; paired t per schedule, Holm over 2)"
    )
    tost = (("a", 0.002), ("b", 0.0004))
    equivalent = Verdict("equivalent", 0.01, "a", 0.001, (-0.002, 0.004), 0.01, 0.005, method=PAIRED, equivalence=tost)
    assert verdict_text(equivalent, "s") == (
        "equivalent: every schedule compared is within ±0.01 of uniform (two-sided TOST, largest p=0.01; paired t per schedule, "
        "Holm over 2); closest by mean: a p=0.002, b p=<0.001; resolution 0.0050 (80% power)"
    )
    undecided = Verdict("undecided", 0.01, "a", resolution=0.0153, next=Confirm(2, 12), reason=OPEN)
    assert verdict_text(undecided, "s") == (
        "undecided at margin 0.01: best other schedule by mean a -0.0100 on 2 seeds, noise not measured; 2 schedules may still "
        "beat uniform by 0.01 or more; resolution 0.0153 (80% power); about 12 paired seeds per schedule resolve the margin: "
        "run `prism-search confirm s --top 2 --seeds 12`"
    )


def test_an_experiment_s_equivalence_says_what_else_its_test_found_after_the_closest():
    """t = -12 on 3 df: the gap is inside the margin and also differs from uniform (p = 0.0012)."""
    plan = Plan("2x3,4x3", "2x6", 2000, (4,), margin=0.01)
    diffs = [-0.003 + 0.0005 * z for z in (-1.2, -0.3, 0.4, 1.1)]  # mean -0.003, sd well below the margin
    runs = {("2x6", 2000 + k): 2.0 for k in range(4)} | {("2x3,4x3", 2000 + k): 2.0 + d for k, d in enumerate(diffs)}
    v = experiment_verdict(state(plan, runs))
    assert v.kind == "equivalent" and v.adjusted_p < 0.001 and reason_text(v).startswith("it also differs from uniform, by -0.0030 [")
    assert verdict_text(v, "s") == (
        "equivalent: every schedule compared is within ±0.01 of uniform (two-sided TOST, largest p=<0.001; "
        f"pre-registered: {plan_text(plan)}); closest by mean: 2x3,4x3 p=<0.001; {reason_text(v)}; "
        f"resolution {v.resolution:.4f} (80% power)"
    )


def test_the_worse_schedules_are_named_worst_first_three_at_most():
    few = Verdict("undecided", 0.01, reason=Uncompared(), worse=(("x", 0.02, 0.01), ("y", 0.03, 0.0004)))
    assert verdict_text(few, "s") == (
        "undecided at margin 0.01: no schedule has been compared with uniform yet; 2 worse than uniform beyond noise: "
        "y +0.0300 (adjusted p=<0.001), x +0.0200 (adjusted p=0.01)"
    )
    many = Verdict("undecided", 0.01, reason=Uncompared(), worse=tuple((f"s{k}", 0.01 * k, 0.01) for k in range(1, 6)))
    assert verdict_text(many, "s").endswith(
        "; 5 worse than uniform beyond noise; worst: s5 +0.0500 (adjusted p=0.01), s4 +0.0400 (adjusted p=0.01), "
        "s3 +0.0300 (adjusted p=0.01)"
    )


def test_three_worse_schedules_are_all_named_without_worst():
    three = Verdict("undecided", 0.01, reason=Uncompared(), worse=tuple((f"s{k}", 0.01 * k, 0.01) for k in range(1, 4)))
    assert verdict_text(three, "s").endswith(
        "; 3 worse than uniform beyond noise: s3 +0.0300 (adjusted p=0.01), s2 +0.0200 (adjusted p=0.01), s1 +0.0100 (adjusted p=0.01)"
    )


def test_a_verdict_without_an_interval_shows_no_number_for_it():
    for kind in ("better", "worse"):
        assert "[+nan, +nan]" in verdict_text(Verdict(kind, 0.01, "a", -0.01, None, 0.01, seeds=(1, 2)), "s")


def test_the_json_holds_every_field_the_words_and_the_command():
    v = Verdict(
        "undecided", 0.01, "a", -0.004, (-0.01, 0.002), 0.3, 0.008, (4, 5), PAIRED,
        equivalence=(("a", 0.2),), worse=(("w", 0.03, 0.001),), next=Confirm(2, 9), reason=OPEN,
    )  # fmt: skip
    assert verdict_json(v, "s") == {
        "kind": "undecided",
        "schedule": "a",
        "effect": -0.004,
        "interval": [-0.01, 0.002],
        "adjusted_p": 0.3,
        "margin": 0.01,
        "resolution": 0.008,
        "seeds": [4, 5],
        "method": "paired t per schedule, Holm over 2",
        "equivalence": [{"schedule": "a", "tost_p": 0.2}],
        "worse": [{"schedule": "w", "effect": 0.03, "adjusted_p": 0.001}],
        "seeds_needed": 9,
        "top": 2,
        "command": "prism-search confirm s --top 2 --seeds 9",
        "text": verdict_text(v, "s"),
    }
    assert list(verdict_json(v, "s"))[-5:] == ["worse", "seeds_needed", "top", "command", "text"]  # `status --json`'s order
    bare = verdict_json(Verdict("undecided", 0.01), "s")
    assert bare["interval"] is None and bare["method"] == "" and (bare["seeds_needed"], bare["top"], bare["command"]) == (None, None, None)
