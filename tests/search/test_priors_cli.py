"""`audit`, `prior` and `run --prior auto` through the CLI: real checkpoints, a real tiny GPT-2, real Ray."""

import json
import sys

import pytest
import torch

from prism import ModelConfig, PrismLM, Schedule, load_corpus, save_checkpoint, val_batches
from prism.probes import probe_sets
from search.cli import main


def cli(monkeypatch, *args) -> int:
    monkeypatch.setattr(sys, "argv", ["prism-search", *map(str, args)])
    with pytest.raises(SystemExit) as exit_info:
        main()
    return exit_info.value.code


@pytest.fixture
def checkpoint(tmp_path):
    torch.manual_seed(0)
    cfg = ModelConfig(n_layer=3, d_model=64, block_size=32, dh_min=16, dh_max=64)
    return save_checkpoint(PrismLM(cfg, Schedule.parse("1,2,4")), tmp_path / "ckpt")


def test_audit_a_checkpoint_writes_profile_and_self_contained_report(monkeypatch, capsys, tmp_path, checkpoint, study_toml):
    out = tmp_path / "profile.json"
    assert cli(monkeypatch, "audit", checkpoint, "-o", out) == 0
    profile = json.loads(out.read_text())
    assert profile["n_layer"] == 3 and profile["schedule"] == "1x1,2x1,4x1" and profile["depths"] == [1 / 3, 2 / 3, 1.0]
    assert set(profile["curves"]) == {"corpus", "hard"}
    for curves in profile["curves"].values():
        assert set(curves) == {"depth_curvature", "token_curvature", "matrix_entropy", "mad_relative", "attn_entropy"}
        assert all(0 <= v <= 1 for v in curves["mad_relative"]) and curves["depth_curvature"][-1] is None
    assert "zones" in profile and all(z["strength"] >= 0.1 for z in profile["zones"])
    html = out.with_suffix(".html").read_text()
    assert "<script src=" not in html and "Plotly.newPlot" in html and len(html) > 1_000_000  # plotly.js embedded

    toml = study_toml(("n_trials = 5", 'n_trials = 5\n[space]\nfamily = "ramp"\nbaseline_heads = 2'))
    prior_path = tmp_path / "prior.json"
    capsys.readouterr()
    assert cli(monkeypatch, "prior", out, toml, "-o", prior_path, "--top", 3) == 0
    prior = json.loads(prior_path.read_text())
    assert prior["n_layer"] == 3 and 1 <= len(prior["schedules"]) <= 3
    printed = capsys.readouterr().out
    header = next(line for line in printed.splitlines() if "rank" in line and "distance" in line)
    columns = [c.strip() for c in header.strip("┃│ ").split("┃" if "┃" in header else "│")]
    assert columns == ["rank", "schedule", "variant", "distance"]
    assert all(f"\n{c}: " in printed for c in columns)  # a legend line explains every column
    assert all(e["schedule"] in printed and e["variant"] in printed for e in prior["schedules"])
    assert all(Schedule.parse(e["schedule"]).is_monotone for e in prior["schedules"])


def test_a_model_trained_on_a_task_is_probed_on_the_tasks_own_sequences(monkeypatch, tmp_path):
    """Byte text folded into a task's 20 tokens is input the model never saw: its `corpus` probes are the task's
    validation sequences, named so in the profile, and they change what the audit measures."""
    task = "pointer:digits=2,base=4,symbols=16"
    torch.manual_seed(0)
    model = PrismLM(ModelConfig(vocab_size=20, n_layer=2, d_model=32, block_size=64, dh_min=4, dh_max=32), Schedule.parse("8,8"))
    folder = save_checkpoint(model, tmp_path / "ckpt", data={"name": task})
    assert cli(monkeypatch, "audit", folder, "-o", tmp_path / "task.json") == 0
    profile = json.loads((tmp_path / "task.json").read_text())
    assert profile["probes"]["corpus"] == f"8 validation sequences of task {task}"
    first = val_batches(load_corpus(task), 64, 8, 1)[0][0]
    assert torch.equal(probe_sets(64, 8, task)[0].tokens, first)  # the sequences every trial was scored on
    save_checkpoint(model, tmp_path / "text", data={"name": "shakespeare"})  # the same weights, probed with bytes
    assert cli(monkeypatch, "audit", tmp_path / "text", "-o", tmp_path / "text.json") == 0
    text = json.loads((tmp_path / "text.json").read_text())
    assert "shakespeare" in text["probes"]["corpus"] and text["curves"]["corpus"] != profile["curves"]["corpus"]
    assert text["curves"]["hard"] == profile["curves"]["hard"]  # the hard set is one for both


def test_audit_a_local_hugging_face_gpt2(monkeypatch, tmp_path):
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=97, n_positions=64, n_embd=64, n_layer=4, n_head=2)
    transformers.GPT2LMHeadModel(config).save_pretrained(tmp_path / "gpt2-tiny")
    out = tmp_path / "gpt2.json"
    assert cli(monkeypatch, "audit", tmp_path / "gpt2-tiny", "-o", out, "--html", tmp_path / "r.html") == 0
    profile = json.loads(out.read_text())
    assert profile["kind"] == "huggingface" and profile["schedule"] == "2x4" and profile["n_layer"] == 4
    assert (tmp_path / "r.html").is_file()


def test_bad_inputs_are_one_line_errors_with_exit_2(monkeypatch, tmp_path, capsys, checkpoint, study_toml, tiny_config):
    (tmp_path / "notamodel").mkdir()
    (tmp_path / "notamodel" / "config.json").write_text('{"hello": 1}')
    cases = [
        (["audit", tmp_path / "notamodel"], "is not a model folder"),
        (["audit", "nosuchthing"], "neither a folder nor STUDY:TRIAL"),
        (["audit", "tiny:0", "--storage", f"sqlite:///{tmp_path / 'none.db'}"], "no prism-search studies in sqlite:///"),
        (["prior", tmp_path / "missing.json", study_toml()], "not found"),
    ]
    out = tmp_path / "p.json"
    assert cli(monkeypatch, "audit", checkpoint, "-o", out) == 0
    deeper = study_toml(("n_layer = 3", "n_layer = 6"), name="deep.toml")
    cases.append((["prior", out, deeper], "profile is of a 3-layer model"))
    (tmp_path / "bad_prior.json").write_text(json.dumps({"format": "prism-prior/1", "n_layer": 6, "schedules": []}))
    cases.append((["run", study_toml(), "--prior", tmp_path / "bad_prior.json"], "is for 6 layers"))
    # a stored trial that kept no checkpoint
    from search.storage import open_storage
    from search.study.create import open_study

    trained = tmp_path / "trained.db"
    study = open_study(tiny_config.model_copy(update={"storage": f"sqlite:///{trained}"}), open_storage(f"sqlite:///{trained}"), "x").study
    study.tell(study.ask(), 2.0)
    cases.append((["audit", "tiny:0", "--storage", f"sqlite:///{trained}"], "trial 0 of study 'tiny' has no checkpoint"))
    cases.append((["audit", "tiny:7", "--storage", f"sqlite:///{trained}"], "has no trial 7"))
    monkeypatch.chdir(tmp_path)  # the tiny study's default storage is ./prism_search.db
    capsys.readouterr()
    for args, message in cases:
        assert cli(monkeypatch, *args) == 2, args
        err = capsys.readouterr().err.strip()
        assert message in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "prism_search.db").exists()  # the refused run stored nothing
    assert not (tmp_path / "none.db").exists()  # reading a study never creates a database


@pytest.mark.e2e
def test_run_prior_auto_end_to_end(monkeypatch, tmp_path, ray_local, study_toml):
    db = tmp_path / "study.db"
    toml = study_toml(("n_trials = 5", f'n_trials = 6\nstorage = "sqlite:///{db}"\n[space]\nfamily = "ramp"\nbaseline_heads = 2'))
    monkeypatch.chdir(tmp_path)
    assert cli(monkeypatch, "run", toml, "--prior", "auto") == 0
    import optuna

    from search.attrs import ATTR_AUDIT, ATTR_PRIOR

    study = optuna.load_study(study_name="tiny", storage=f"sqlite:///{db}")
    audit = json.loads(study.user_attrs[ATTR_AUDIT])
    prior = json.loads(study.user_attrs[ATTR_PRIOR])
    assert audit["source"] == "tiny:0" and audit["n_layer"] == 3 and "zones" in audit
    trials = study.get_trials()
    assert [t.user_attrs["role"] for t in trials[:2]] == ["baseline", "baseline"]
    from_prior = [t.user_attrs["schedule"] for t in trials if t.user_attrs.get("source") == "prior"]
    assert from_prior and set(from_prior) <= {e["schedule"] for e in prior["schedules"]}
    assert min(t.number for t in trials if t.user_attrs.get("source") == "prior") == 2  # right after the baselines
    assert len([t for t in trials if t.state.is_finished() and t.state.name != "FAIL"]) >= 6
    # the kept baseline checkpoint is auditable as STUDY:TRIAL
    out = tmp_path / "again.json"
    assert cli(monkeypatch, "audit", "tiny:0", "-o", out, "--storage", f"sqlite:///{db}") == 0
    assert json.loads(out.read_text())["zones"] == audit["zones"]
