"""What the CLI asks of the runner and the priors outside a study's lifecycle: train or analyze one model, audit a
model, turn a profile into a prior, check a cluster address. The CLI reaches them only through the study (the arrows:
CLI -> study -> {runner, priors}), so the CLI's imports say what it may touch. Importing this module loads torch:
the CLI imports it inside the commands that need it.
"""

from pathlib import Path

from prism.analysis import LayerMetrics
from search.priors import audit_model, load_source, make_prior, read_profile, trial_checkpoint, write_report
from search.priors.mapping import LATE_DEFAULT, ONSET_DEFAULT
from search.runner.cluster import check_cluster
from search.runner.single import analyze_checkpoint, resolve, train_single


def analyze_source(source: str, storage_url: str) -> tuple[dict, list[LayerMetrics]]:
    """`analyze SOURCE`: a checkpoint folder, or a stored trial's (`STUDY:N`, `STUDY:baseline`) as `audit` reads it."""
    checkpoint = None if Path(source).is_dir() else trial_checkpoint(source, storage_url)
    return analyze_checkpoint(str(checkpoint or source))


__all__ = [
    "LATE_DEFAULT",
    "ONSET_DEFAULT",
    "analyze_source",
    "audit_model",
    "check_cluster",
    "load_source",
    "make_prior",
    "read_profile",
    "resolve",
    "train_single",
    "write_report",
]
