"""`prism-search audit SOURCE`: a model's per-layer geometry on fixed probe texts, with its transition zones.

SOURCE is a stored trial (`STUDY:TRIAL` or `STUDY:baseline`, whose `checkpoint` user attr names its checkpoint folder), a Prism
checkpoint folder, or a local Hugging Face GPT-2-family folder. The profile (search.priors.profile) is stored as
plain JSON, so the `prior` command, the study's user attrs and the dashboard all read the same thing.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from optuna.trial import TrialState

from prism import PrismLM
from prism.analysis import layer_profile
from prism.probes import probe_sets
from search.errors import AuditError
from search.outputs import check_output, jsonout, write_output
from search.priors.profile import Profile
from search.priors.zones import MIN_STRENGTH, detect_zones

if TYPE_CHECKING:
    import optuna

# the per-layer curves of the report and of zone detection: (LayerMetrics attribute, label, unit)
METRICS = [
    ("depth_curvature", "depth curvature", "rad"),
    ("token_curvature", "token curvature", "rad"),
    ("matrix_entropy", "matrix entropy", "normalised"),
    ("mad_relative", "mean attention distance (relative)", "fraction of position"),
    ("attn_entropy", "attention entropy", "nats"),
]
_TRIAL_REF = re.compile(r"^(?P<study>[A-Za-z0-9_.\-]+):(?P<trial>[0-9]+|baseline)$")  # STUDY:N or STUDY:baseline


def _load_folder(path: Path) -> tuple[PrismLM, str, str]:
    """A Prism checkpoint or a Hugging Face GPT-2 folder, told apart by their config.json: the model, its kind and
    the corpus it was trained on (what a checkpoint records; else the built-in text)."""
    from prism.checkpoint import CheckpointError, load_checkpoint
    from prism.hf import load_hf_gpt2

    config = path / "config.json"
    try:
        meta = json.loads(config.read_text()) if config.is_file() else None
    except (json.JSONDecodeError, UnicodeDecodeError):
        meta = None
    if not isinstance(meta, dict) or not ({"format", "model_type"} & meta.keys()):
        raise AuditError(
            f"{str(path)!r} is not a model folder (no Prism checkpoint or Hugging Face config.json); pass a checkpoint "
            "folder, a local GPT-2 folder or STUDY:TRIAL"
        )
    try:
        if "format" in meta:
            model, saved = load_checkpoint(path)
            data = saved.get("data")
            trained_on = data.get("name") if isinstance(data, dict) else None
            return model, "checkpoint", trained_on if isinstance(trained_on, str) else "shakespeare"
        return load_hf_gpt2(path), "huggingface", "shakespeare"
    except (CheckpointError, KeyError, ValueError, RuntimeError) as e:
        raise AuditError(f"{path}: cannot load the model ({str(e).splitlines()[0]})") from None


def trial_checkpoint(source: str, storage_url: str) -> Path | None:
    """The checkpoint folder of `STUDY:N` or `STUDY:baseline` (the paired uniform baseline's COMPLETE run, whichever
    trial number a failed first try left it), or None when `source` names no trial."""
    from search.analysis.summary import paired_baseline
    from search.attrs import ATTR_CHECKPOINT
    from search.storage import open_storage
    from search.storage.records import find_study, malformed, readable, stored_config

    match = _TRIAL_REF.match(source)
    if not match:
        return None
    name = match["study"]
    study = find_study(name, open_storage(storage_url, create=False))
    config = stored_config(study)  # a study prism-search made, or one line saying it is not
    trials = study.get_trials(deepcopy=False)
    baseline = paired_baseline(readable(trials)[0], config)
    if match["trial"] == "baseline":
        if baseline is None:
            raise AuditError(f"study {name!r} has no finished paired baseline yet; run or resume it")
        trial = baseline
    elif int(match["trial"]) >= len(trials):
        raise AuditError(f"study {name!r} has no trial {match['trial']} (it has {len(trials)}); check STUDY:TRIAL")
    else:
        trial = trials[int(match["trial"])]
    if why := malformed(trial):
        raise AuditError(f"trial {trial.number} of study {name!r} cannot be read: {why} (changed outside prism-search)")
    path = trial.user_attrs.get(ATTR_CHECKPOINT)
    if not path and trial.state != TrialState.COMPLETE:
        other = f"; the paired baseline is trial {baseline.number} ({name}:baseline)" if baseline is not None else ""
        raise AuditError(f"trial {trial.number} of study {name!r} is {trial.state.name}: it left no model{other}")
    if not path:
        raise AuditError(
            f"trial {trial.number} of study {name!r} has no checkpoint; rerun it with checkpoints kept "
            '(keep_checkpoints = "all"; `run --prior auto` keeps the baseline\'s) or audit a checkpoint folder'
        )
    if not Path(path).is_dir():
        raise AuditError(f"trial {trial.number} of study {name!r}: checkpoint folder {path!r} is gone; audit another source")
    return owned_checkpoint(path, study)


def owned_checkpoint(path: str | Path, study: optuna.Study) -> Path:
    """`path`, once its checkpoint is known to be `study`'s own (the study id it records is the study's; its folder
    is named by it too, search.runner.checkpoints), or an AuditError naming both studies: a model another study of
    the same name wrote is never read for this one."""
    from prism.checkpoint import CheckpointError, read_checkpoint_config
    from search.storage.records import is_copy, study_uid

    if is_copy(study):
        raise AuditError(
            f"study {study.study_name!r} of this storage is a copy of one stored elsewhere, and the models its trials name "
            f"are that study's ({str(path)!r}); audit the checkpoint folder itself, or resume the copy to train its own"
        )

    try:
        meta = read_checkpoint_config(path)
    except CheckpointError as e:
        raise AuditError(str(e)) from None
    expected, found = study_uid(study), meta.get("study_uid")
    if found != expected or meta.get("study") != study.study_name:
        raise AuditError(
            f"checkpoint {str(path)!r} was written by study {meta.get('study')!r} (id {found or 'none'}), not by study "
            f"{study.study_name!r} (id {expected or 'none'}) of this storage; audit the checkpoint folder itself, or "
            "rerun the trial to save its own model"
        )
    return Path(path)


def load_source(source: str, storage_url: str) -> tuple[PrismLM, str, str]:
    """The model SOURCE names, its kind ("checkpoint", "huggingface") and the corpus it was trained on."""
    path = Path(source)
    if path.is_dir():
        return _load_folder(path)
    checkpoint = trial_checkpoint(source, storage_url)
    if checkpoint:
        return _load_folder(checkpoint)
    raise AuditError(
        f"audit source {source!r} is neither a folder nor STUDY:TRIAL; pass a checkpoint or GPT-2 folder, or e.g. "
        "quickstart:baseline or quickstart:3"
    )


@torch.no_grad()
def audit_model(model: PrismLM, source: str = "", n_probes: int = 8, trained_on: str = "shakespeare") -> Profile:
    """Every metric per layer on each probe set, plus the transition zones of all curves together. `trained_on`:
    the model's corpus; a task's model is probed on the task's own sequences (prism.probes)."""
    model.eval()
    cfg = model.cfg
    L = cfg.n_layer
    probes_of, layers, by_probe = {}, {}, {}
    device = next(model.parameters()).device
    for probes in probe_sets(cfg.block_size, n_probes, trained_on):
        tokens = probes.tokens % cfg.vocab_size  # byte ids; a smaller vocab folds them, keeping repeats and pairs
        rows = layer_profile(model.trace(tokens.to(device)))
        probes_of[probes.name] = probes.description
        layers[probes.name] = [vars(r) for r in rows]
        by_probe[probes.name] = {attr: [getattr(r, attr) for r in rows] for attr, _, _ in METRICS}
    curves = {f"{p}.{m}": values for p, by_metric in by_probe.items() for m, values in by_metric.items()}
    return Profile(
        n_layer=L,
        zones=detect_zones(curves),
        source=source,
        schedule=str(model.schedule),
        d_model=cfg.d_model,
        depths=[(layer + 1) / L for layer in range(L)],
        probes=probes_of,
        curves=by_probe,
        layers=layers,
        zone_method=(
            f"search.priors.zones: z-normalised per-layer curves ({len(curves)}: 5 metrics x probe sets), [1,2,1]/4 "
            f"smoothing from 6 layers, mean |change| per boundary, local maxima with prominence (strength) >= {MIN_STRENGTH}"
        ),
    )


def write_audit(source: str, storage_url: str, output: str, html: str | None = None) -> tuple[Profile, Path]:
    """`audit SOURCE`: audit the model SOURCE names, write its profile (JSON, `output`) and its report (`html`,
    default: the profile's name with .html); both places are checked before the model loads. Returns the profile
    and where the report went."""
    page = html or Path(output).with_suffix(".html")
    check_output(output, "-o", ".json")
    check_output(page, "--html", ".html")
    model, kind, trained_on = load_source(source, storage_url)
    profile = replace(audit_model(model, source=source, trained_on=trained_on), kind=kind)
    write_output(output, jsonout.dumps(profile.to_dict(), indent=1), "-o", ".json")
    return profile, write_report(profile, page, "--html")


def write_report(profile: Profile, path: str | Path, flag: str = "--html") -> Path:
    """A self-contained HTML page (plotly JS embedded): one panel per metric against relative depth, zones shaded."""
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=len(METRICS), cols=1, shared_xaxes=True, subplot_titles=[f"{label} ({unit})" for _, label, unit in METRICS])
    depths = profile.depths
    for row, (attr, _, _) in enumerate(METRICS, start=1):
        for i, (probe, by_metric) in enumerate(profile.curves.items()):
            fig.add_scatter(
                x=depths,
                y=by_metric[attr],
                mode="lines+markers",
                name=probe,
                legendgroup=probe,
                showlegend=row == 1,
                line={"color": ("#1f77b4", "#d62728", "#2ca02c")[i % 3]},
                customdata=list(range(len(depths))),
                hovertemplate="layer %{customdata}, depth %{x:.3f}: %{y:.4f}",
                row=row,
                col=1,
            )
    for z in profile.zones:
        half = 0.5 / profile.n_layer
        fig.add_vrect(
            x0=z.start - half,
            x1=z.end + half,
            fillcolor="orange",
            opacity=min(0.5, 0.1 + z.strength / 4),
            line_width=0,
            annotation_text=f"zone {z.depth:.2f} (strength {z.strength:.2f})",
            annotation_position="top left",
            row="all",
            col=1,
        )
    fig.update_xaxes(title_text="relative depth (layer + 1) / L", row=len(METRICS), col=1)
    fig.update_layout(height=220 * len(METRICS), title=f"layer geometry of {profile.source} ({profile.schedule})")
    return write_output(path, fig.to_html(include_plotlyjs=True, full_html=True), flag, ".html")
