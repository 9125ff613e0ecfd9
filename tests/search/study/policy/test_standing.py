"""Where a study's policies stand, as `status` and the dashboard show it: read from the stored runs, as the driver
acts on them (search.study.policy)."""

from search.config import StudyConfig
from search.study.policy import Exhausted, Position, Standing
from tests.search.analysis.test_summary import UNIFORM, add, make_study


def test_a_racing_study_shows_where_each_schedule_stands(tiny_config, monkeypatch, capsys):
    from search import cli
    from search.analysis import summarize
    from search.dashboard.pages import study_page
    from search.dashboard.views import study_view

    monkeypatch.setattr(cli.console, "width", 250)
    racing = tiny_config.model_copy(update={"search": tiny_config.search.model_copy(update={"racing": True})})
    study = make_study(racing)
    for seed in (0, 1, 2):
        add(study, UNIFORM, seed, 2.05 + 0.01 * seed, role="baseline")
    add(study, "4x3", 0, 2.049)  # within the margin of the incumbent (uniform) at the search seed: raced
    add(study, "2x3", 0, 2.20)  # worse than the margin at its first seed: not raced
    now = Standing.of(study.get_trials(), racing)
    assert now.race is not None and now.race.incumbent == UNIFORM and now.race.queue == [("4x3", 1)]
    assert now.race.standing == {
        UNIFORM: Position("incumbent"),
        "4x3": Position("racing", 1, upto=2),
        "2x3": Position("not raced", 1, rival=UNIFORM, gap=now.race.standing["2x3"].gap, margin=racing.search.margin),
    }
    assert now.to_dict()["race"]["4x3"] == {"kind": "racing", "seeds": 1, "upto": 2, "text": "racing: 1 -> 2 seeds"}
    cli._print_summary(summarize(study), None, now)
    assert "race 4x3" in capsys.readouterr().out
    html = study_page(study_view(study), "sqlite:///x.db", live=False)
    assert '<table id="race"' in html and "racing: 1 -&gt; 2 seeds" in html
    plain = make_study(tiny_config, "plain")
    add(plain, UNIFORM, 0, 2.05, role="baseline")
    assert Standing.of(plain.get_trials(), tiny_config) == Standing()  # not racing, not stopped: nothing to show


def test_a_study_short_of_n_trials_whose_space_ran_out_stands_stopped(tiny_config):
    """Every member of the space trained (the uniform family: 3 schedules) before n_trials: the stop rule's reason,
    typed, with its text beside it in `status --json`; a study that reached n_trials did not stop early."""
    data = tiny_config.model_dump()
    data["space"]["family"] = "uniform"
    small = StudyConfig.model_validate(data)
    study = make_study(small)
    for schedule in ("1x3", "2x3", "4x3"):
        add(study, schedule, 0, 2.0)
    now = Standing.of(study.get_trials(), small)
    assert now.stopped == Exhausted(3, "uniform") and now.race is None
    assert now.to_dict()["stopped"] == {"distinct": 3, "family": "uniform", "streak": None, "text": now.stopped.text()}
    assert Standing.of(study.get_trials(), small.model_copy(update={"n_trials": 3})).stopped is None
