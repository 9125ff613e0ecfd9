"""The names of what a study and its trials store as Optuna attrs, declared once for every writer (runner, study)
and reader (summary, export, dashboard, trackers) so none spells a key on its own. Imports nothing: the trackers
read these names too and must not import the storage.
"""

# on the study
ATTR_CONFIG = "prism.config"
ATTR_FINGERPRINT = "prism.corpus_fingerprint"
ATTR_CONFIRMATION = "prism.confirmation"  # + ".plan": the schedules and seed count `confirm` queued
ATTR_PRIOR = "prism.prior"  # the prior a study was seeded with (search.study.lifecycle), JSON
ATTR_AUDIT = "prism.audit"  # the geometry profile behind it, JSON; on a trial: that trial's own audit

# on each trial: what it runs, why, and what became of it
SCHEDULE = "schedule"  # HEADSxLAYERS
ROLE = "role"  # one of the ROLE_ values below
SEED = "seed"
REFERENCE = "reference"  # the name of a [[references]] schedule, on its trials
HEADS_PREFIX = "heads_"  # + the layer: heads_00, heads_01, ...
CURVE = "curve"  # [[training tokens, val loss], ...]
ATTEMPT = "attempt"  # how often a lost trial was queued again
RETRY_OF = "retry_of"  # the number of the failed trial this one runs again
ERROR = "error"  # why a trial failed
WORKER = "worker"  # {"host", "pid", "device", "kernels"} of the worker that trained it
PRUNED_AT_TOKENS = "pruned_at_tokens"
DUPLICATE_ATTR = "duplicate_of"  # the number of the trial whose result this one copied (see search.runner.cache)
ATTR_CHECKPOINT = "checkpoint"  # the directory of the trial's saved model, when the study keeps checkpoints
ATTR_CHECKPOINT_ERROR = "checkpoint_error"  # why a finished trial's model could not be saved (its result is kept)
RESULT_KEYS = ("tokens_per_s", "n_params", "flops_per_token", "wall_time_s", "steps", "tokens")

# why a trial runs (its ROLE)
ROLE_BASELINE = "baseline"  # the uniform schedule: every gap is paired with it
ROLE_SEARCH = "search"  # sampled or queued by the search; the default of a trial without a role
ROLE_REFERENCE = "reference"
ROLE_CONFIRM = "confirm"  # `prism-search confirm`: fresh seeds, never ranked


def heads_attr(layer: int) -> str:
    """One attr per layer (`heads_00`, ...), so Optuna's and our dashboards can plot each layer's head count."""
    return f"{HEADS_PREFIX}{layer:02d}"
