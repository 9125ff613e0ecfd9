"""What reading commands make of stored trials that prism-search did not write that way: each malformed trial is
named and left out, never the end of the command (real SQLite, the real CLI)."""

import json

import optuna

import search.attrs
from search.config import parse_config
from search.dashboard.views import study_view
from search.storage.records import PREFIX_KINDS, TRIAL_ATTR_KINDS, malformed
from search.text import warnings
from tests.search.dashboard.test_cli import cli
from tests.search.synthetic import synthetic_study

# the names in search.attrs that are no trial attr a reader reads: study attrs, values of `role` and `source`,
# Optuna's system attr, and the tuple of result keys
_NOT_TRIAL_ATTRS = {
    "ATTR_CONFIG",
    "ATTR_FINGERPRINT",
    "ATTR_STUDY_UID",
    "ATTR_STUDY_HOME",
    "ATTR_CONFIRMATION_PLAN",
    "ATTR_ROUNDS",
    "ATTR_PRIOR",
    "ATTR_CHANGES",
    "GRID_INDEX",
}


def _trial_attr_names() -> set[str]:
    return {
        value
        for name, value in vars(search.attrs).items()
        if name.isupper() and isinstance(value, str) and name not in _NOT_TRIAL_ATTRS and not name.startswith(("ROLE_", "SOURCE_"))
    }


def _wrong(key: str):
    """A value of another kind than `key`'s writer stores."""
    check = (TRIAL_ATTR_KINDS.get(key) or next(k for p, k in PREFIX_KINDS.items() if key.startswith(p)))[1]
    return next(v for v in ("oops", {"a": 1}, 3.5, [1, 2]) if not check(v))


def test_every_trial_attr_the_product_reads_has_a_kind_it_is_checked_against():
    assert _trial_attr_names() == set(TRIAL_ATTR_KINDS) | set(PREFIX_KINDS)


def test_each_malformed_trial_is_named_and_left_out_by_every_reader(monkeypatch, capsys, tmp_path):
    """One stored trial per attr, that attr of the wrong kind (a `worker` string ended `status` in a traceback):
    status, its JSON, best, export and the dashboard read the rest and name each one left out; audit names the one
    it was asked for."""
    url = f"sqlite:///{tmp_path / 's.db'}"
    config = parse_config({"name": "s", "model": {"n_layer": 3, "d_model": 64, "dh_min": 16, "dh_max": 64}, "storage": url})
    study = synthetic_study(config, url, 12, failed=0)
    good = next(t for t in study.trials if t.state.name == "COMPLETE" and t.user_attrs["role"] == "search")
    keys = [*sorted(TRIAL_ATTR_KINDS), "heads_01", "rung_0"]
    bad = {}
    for key in keys:
        attrs = good.user_attrs | {key: _wrong(key)}
        study.add_trial(optuna.trial.create_trial(value=good.value, params=good.params, distributions=good.distributions, user_attrs=attrs))
        bad[study.trials[-1].number] = key
    assert all(malformed(study.trials[n]) for n in bad) and malformed(good) is None

    code, out, err = cli(monkeypatch, capsys, "status", "--storage", url)
    assert code == 0 and "Traceback" not in out + err and "study s" in out, err
    for number, key in bad.items():
        assert f"trial {number} left out: its attr {key!r}" in err, (key, err)
    code, out, err = cli(monkeypatch, capsys, "status", "--storage", url, "--json")
    (summary,) = json.loads(out)
    assert code == 0 and {int(n) for n in summary["left_out"]} == set(bad)
    assert sum(summary["counts"].values()) == len(study.trials) - len(bad)
    assert cli(monkeypatch, capsys, "best", "s", "--storage", url)[0] == 0
    code, out, _ = cli(monkeypatch, capsys, "export", "s", "--storage", url, "--format", "json")
    assert code == 0 and not {row["number"] for row in json.loads(out)} & set(bad)
    number = next(n for n, key in bad.items() if key == "checkpoint")
    code, _, err = cli(monkeypatch, capsys, "audit", f"s:{number}", "--storage", url, "-o", str(tmp_path / "p.json"))
    assert code == 2 and f"trial {number} of study 's' cannot be read: its attr 'checkpoint'" in err and len(err.splitlines()) == 1
    view = study_view(optuna.load_study(study_name="s", storage=url))
    assert not {r.number for r in view.rows} & set(bad) and view.row(max(bad)) is None and view.row(good.number) is not None
    assert view.summary is not None and len([w for w in warnings(view.summary) if "left out" in w]) == len(bad)


def test_a_study_whose_stored_config_fails_is_named_and_the_others_listed(monkeypatch, capsys, tmp_path):
    url = f"sqlite:///{tmp_path / 's.db'}"
    small = {"model": {"n_layer": 3, "d_model": 64, "dh_min": 16, "dh_max": 64}, "storage": url}
    for name in ("first", "broken", "last"):
        synthetic_study(parse_config({"name": name, **small}), url, 6, failed=0)
    broken = optuna.load_study(study_name="broken", storage=url)
    stored = json.loads(broken.user_attrs["prism.config"])
    broken.set_user_attr("prism.config", json.dumps(stored | {"seed": "zero"}))  # changed outside prism-search

    code, out, err = cli(monkeypatch, capsys, "status", "--storage", url)
    assert code == 0 and "study first" in out and "study last" in out and "study broken" not in out, out
    (line,) = [line for line in err.splitlines() if "broken" in line]
    assert line.startswith("study broken left out: stored config of study 'broken'") and "seed" in line, err
    code, out, err = cli(monkeypatch, capsys, "status", "--storage", url, "--json")
    listed = json.loads(out)
    assert code == 0 and [s["name"] for s in listed] == ["first", "last", "broken"]
    assert "seed" in listed[-1]["error"] and set(listed[-1]) == {"name", "error"}
    code, _, err = cli(monkeypatch, capsys, "status", "broken", "--storage", url)
    assert code == 2 and "seed" in err and len(err.strip().splitlines()) == 1  # asked for by name: its error alone
