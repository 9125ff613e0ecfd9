"""The names of what a study and its trials store as Optuna attrs, declared once for every writer (runner, study)
and reader (summary, export, dashboard, trackers) so none spells a key on its own. Imports nothing: the trackers
read these names too and must not import the storage.
"""

# on the study
ATTR_CONFIG = "prism.config"
ATTR_FINGERPRINT = "prism.corpus_fingerprint"
ATTR_STUDY_UID = "prism.study_uid"  # made at creation: names its checkpoint folder, recorded in each checkpoint
ATTR_STUDY_HOME = "prism.study_home"  # where the study's id was claimed (search.storage.study_home): a copy lives elsewhere
ATTR_CONFIRMATION_PLAN = "prism.confirmation.plan"  # the schedules and seed count `confirm` queued, JSON
ATTR_ROUNDS = "prism.rounds"  # confirmation in rounds: round 1's contenders and the frozen pick, JSON (search.analysis.rounds)
ATTR_PRIOR = "prism.prior"  # the prior a study was seeded with (search.study._lifecycle), JSON
ATTR_CHANGES = "prism.changes"  # how trials are executed, changed by a later `run` (search.study.create), JSON list
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
# True: the trial failed by its trainer's own error (it raised, exited non-zero, diverged), not a time-out, a kill or a
# lost worker; its schedule is not trained again in the study (search.runner.cache.failed_before)
FAILED_ITSELF = "failed_itself"
WORKER = "worker"  # {"host", "pid", "device", "kernels"} of the worker that trained it
PRUNED_AT_TOKENS = "pruned_at_tokens"
PRUNED_AT_RUNG = "pruned_at_rung"  # the rung a multi-objective trial was stopped at (search.study.pruning)
RUNG_PREFIX = "rung_"  # + the rung: its val loss at the rung's budget (see rung_attr)
GRID_INDEX = "prism.grid_index"  # a system attr: the trial's place in a grid study's walk (search.study.samplers)
SOURCE = "source"  # where a queued trial's schedule came from: SOURCE_PRIOR, or absent
PRIOR_RANK = "prior_rank"  # its rank in that prior
DUPLICATE_ATTR = "duplicate_of"  # the number of the trial whose result this one copied (see search.runner.cache)
ATTR_CHECKPOINT = "checkpoint"  # the directory of the trial's saved model, when the study keeps checkpoints

# a trained trial's result: the fields of prism.TrainResult, plus what the worker measured beside it (its extras)
TOKENS_PER_S = "tokens_per_s"
N_PARAMS = "n_params"
FLOPS_PER_TOKEN = "flops_per_token"
WALL_TIME_S = "wall_time_s"
STEPS = "steps"
TOKENS = "tokens"
RESULT_KEYS = (TOKENS_PER_S, N_PARAMS, FLOPS_PER_TOKEN, WALL_TIME_S, STEPS, TOKENS)
THROUGHPUT_RATIO = "throughput_ratio"  # tokens/s paired with uniform's (search.runner.worker.throughput_ratio)
UNIFORM_TOKENS_PER_S = "uniform_tokens_per_s"  # uniform's tokens/s in that pairing
ATTR_CHECKPOINT_ERROR = "checkpoint_error"  # why a finished trial's model could not be saved (its result is kept)

# why a trial runs (its ROLE)
ROLE_BASELINE = "baseline"  # the uniform schedule: every gap is paired with it
ROLE_SEARCH = "search"  # sampled or queued by the search; the default of a trial without a role
ROLE_REFERENCE = "reference"
ROLE_CONFIRM = "confirm"  # `prism-search confirm`: fresh seeds, never ranked
ROLE_RACE = "race"  # a schedule run again on another paired seed by racing (search.study.policy.racing)

SOURCE_PRIOR = "prior"  # a SOURCE: queued from the study's prior (search.study._lifecycle)


def heads_attr(layer: int) -> str:
    """One attr per layer (`heads_00`, ...), so Optuna's and our dashboards can plot each layer's head count."""
    return f"{HEADS_PREFIX}{layer:02d}"


def rung_attr(rung: int) -> str:
    """One attr per successive-halving rung (`rung_0`, ...): stored in the database, so every driver compares them."""
    return f"{RUNG_PREFIX}{rung}"
