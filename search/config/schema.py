"""The study config's schema: one pydantic model per TOML section, each field with its bounds and the description the
reference page (docs/configuration.md) is written from, and the rules between fields."""

from __future__ import annotations

import glob
import itertools
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, get_type_hints

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    create_model,
    field_validator,
    model_validator,
)

from prism import (
    BUILTIN_CORPORA,
    ModelConfig,
    Schedule,
    ScheduleError,
    TaskError,
    TrainConfig,
    allowed_head_counts,
    corpus_vocab,
    is_task,
    parse_task,
    validate,
)
from prism.config import MAX_SEED, MAX_STEPS, check_power_of_two
from search.attrs import THROUGHPUT_RATIO
from search.errors import ConfigError
from search.families import DEFAULT_LATE_ZONE, FAMILIES, ScheduleFamily, make_family
from search.families.references import Reference, parse_reference
from search.outputs.urls import mask_url
from search.trainers import PrismTrainer, TrainerSection

if TYPE_CHECKING:
    from prism import TrainResult  # loads torch: a config is read without it

DEFAULT_STORAGE = "sqlite:///prism_search.db"
STORAGE_ENV = "PRISM_SEARCH_STORAGE"  # the database every command and Study use when none is given (as MLFLOW_TRACKING_URI)
MIN_LOOK = 3  # an experiment's first look: fewer pairs measure no noise (search.analysis.stats.MIN_PAIRS)
MAX_SEEDS = 100  # baseline or confirmation seeds of one schedule; seeds stay below 2**32 past the study seed's offsets
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*")  # a single path component, never `.`, `..` or hidden


class _Section(BaseModel):
    """Strict: pydantic's lax mode reads `true` as 1, "5" as 5, 3.0 as 3 and "yes" as true, each a mistake in a TOML
    file (and 1e23 in an integer field a typo), so a field takes only a value of its own kind; a float field takes an
    integer too. inf/nan would validate against every bound and then break training or the stored study's JSON."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, strict=True)


def _section_of(cls: type, descriptions: Mapping[str, str], exclude: tuple[str, ...] = ()) -> Any:
    """A TOML section declared by a prism dataclass: its fields, types, defaults and bounds, restated nowhere; the
    descriptions (what docs/configuration.md says of each field) are the study config's own words."""
    hints = get_type_hints(cls)
    settings: dict[str, Any] = {
        f.name: (hints[f.name], Field(f.default, description=descriptions.get(f.name), **f.metadata))
        for f in fields(cls)
        if f.name not in exclude
    }
    return create_model(f"{cls.__name__}Fields", __base__=_Section, **settings)


_MODEL_FIELDS = {
    "vocab_size": "token ids the model embeds; left out: the data's (a task's own tokens, the BPE size, the token files' "
    "declared vocab, else 256 bytes)",
    "n_layer": "Transformer blocks; a schedule gives each its own head count",
    "d_model": "width of the residual stream; a layer's heads split it (head dim = d_model / heads)",
    "block_size": "context length in tokens (training and validation windows)",
    "dh_min": "smallest head dim a schedule may use, a power of two (the most heads per layer: d_model / dh_min)",
    "dh_max": "largest head dim a schedule may use, a power of two (the fewest heads per layer: d_model / dh_max)",
    "mlp_ratio": "MLP hidden width over d_model (swiglu: 2/3 of that width, rounded up to a multiple of 8)",
    "dropout": "dropout on attention weights, residual branches and embeddings; 0: none",
    "bias": "biases in the linear layers and LayerNorms",
    "positions": "learned absolute position embeddings, or rope (rotary, per head at the layer's head dim, no parameters)",
    "norm": "layernorm or rmsnorm",
    "mlp": "gelu-exact (nanoGPT's), gelu (GPT-2's tanh form, which Hugging Face GPT-2 checkpoints expect) or swiglu",
    "qk_norm": "RMS-normalise queries and keys per head (a d_model-wide gain)",
}


class ModelSection(_section_of(ModelConfig, _MODEL_FIELDS)):  # type: ignore[misc]  # a base built at import time
    @field_validator("dh_min", "dh_max")
    @classmethod
    def _power_of_two(cls, v: int) -> int:
        return check_power_of_two(v)

    @model_validator(mode="after")
    def _dims_fit(self) -> ModelSection:
        if not allowed_head_counts(self.to_model_config()):  # ModelConfig checks the rest (dh_min <= dh_max)
            raise ValueError(
                f"no power-of-two head dim in [{self.dh_min}, {self.dh_max}] divides d_model={self.d_model}; "
                "use a d_model that is a multiple of dh_min"
            )
        return self

    def to_model_config(self) -> ModelConfig:
        return ModelConfig(**self.model_dump())


class SpaceSection(_Section):
    family: Literal[tuple(FAMILIES)] = Field(  # type: ignore[valid-type]  # the registry's names
        "ramp", description="the schedule space (search/families/): ramp (monotone), ramp+late, free (any count per layer) or uniform"
    )
    baseline_heads: int | None = Field(None, gt=0, le=2**16, description="uniform baseline head count; default: head dim 64")
    references: list[str] = Field(default_factory=list, description="enqueued after the baseline: SCHEDULE, NAME=SCHEDULE or paper-ramp")
    late_zone: tuple[float, float] = Field(
        DEFAULT_LATE_ZONE, strict=False, description="ramp+late: relative depths of the 2nd rise"
    )  # not strict: TOML and stored JSON spell a pair as a list; its numbers stay strict

    @field_validator("late_zone")
    @classmethod
    def _zone_inside(cls, v: tuple[float, float]) -> tuple[float, float]:
        if not 0 < v[0] <= v[1] < 1:
            raise ValueError(f"{list(v)} must satisfy 0 < start <= end < 1 (relative depths), e.g. [0.75, 0.9]")
        return v


_TRAIN_FIELDS = {
    "steps": "optimizer steps per trial",
    "batch_size": "sequences per step (training tokens per step: batch_size x model.block_size)",
    "lr": "peak learning rate of AdamW",
    "min_lr_ratio": "the cosine decay ends at min_lr_ratio x lr at the last step",
    "warmup_steps": "linear learning-rate warmup before the cosine decay; below steps",
    "weight_decay": "AdamW weight decay of the matrices and embeddings (biases and norm gains get none)",
    "beta1": "AdamW's first-moment decay",
    "beta2": "AdamW's second-moment decay",
    "grad_clip": "gradient norm clipped to this before every step",
    "eval_every": "steps between validation evaluations: the learning curve's points and the pruner's rungs",
    "eval_batches": "validation batches per evaluation: the same fixed windows for every trial",
    "precision": "auto: bf16 autocast on GPUs that run it natively (capability 8.0+), fp16 with loss scaling on older ones, fp32 on CPU",
    "compile": "torch.compile each block and the head, one graph per head count for every schedule (off: compiling dwarfs a short trial)",
    "fused_adamw": "always: AdamW's fused kernel on every device; cuda: on CUDA only (nanoGPT's rule)",
}


# the study's top-level seed and its resources set TrainConfig's seed and device
class TrainSection(_section_of(TrainConfig, _TRAIN_FIELDS, exclude=("seed", "device"))):  # type: ignore[misc]
    def to_train_config(self, seed: int, device: str = "cpu") -> TrainConfig:
        return TrainConfig(**self.model_dump(), seed=seed, device=device)


class DataSection(_Section):
    corpus: str = Field(
        "shakespeare",
        description="built-in name, a synthetic task (mqar, pointer, count, mix or offset, with settings such as "
        "pointer:digits=2,base=4: below), or a text file/folder/glob, .bin file, train.bin+val.bin folder or datasets "
        "save_to_disk folder",
    )
    val_fraction: float = Field(
        0.1, gt=0, lt=0.5, description="share of the corpus held out for validation (a train.bin + val.bin folder: its val.bin)"
    )
    tokenizer: Literal["bytes", "bpe"] = Field(
        "bytes", description="bytes (256 ids), or bpe: a byte-level BPE of vocab_size tokens trained locally on the training text"
    )
    vocab_size: int | None = Field(None, gt=0, le=2**24, description="BPE size (default 4096), or the declared vocab of token files")
    token_dtype: Literal["uint16", "uint32"] = Field("uint16", description="integer type of .bin token files; uint32 for ids above 65535")

    @field_validator("corpus")
    @classmethod
    def _known(cls, v: str, info: ValidationInfo) -> str:
        """Built-in names stay names; paths become absolute, because Ray workers run in another directory.
        A stored study's corpus is taken as stored: only the commands that train load it (and say if it moved)."""
        if v in BUILTIN_CORPORA or (info.context or {}).get("stored"):
            return v
        if is_task(v):
            try:
                parse_task(v)
            except TaskError as e:
                raise ValueError(str(e)) from None
            return v
        if _exists(v) or (any(c in v for c in "*?[") and glob.glob(v, recursive=True)):
            return str(Path(v).absolute())
        raise ValueError(f"unknown corpus {v!r}: not a built-in ({', '.join(BUILTIN_CORPORA)}) nor an existing path or glob")

    def corpus_options(self) -> dict:
        """Keyword arguments of `prism.load_corpus` besides the corpus and val_fraction."""
        return {"tokenizer": self.tokenizer, "vocab_size": self.vocab_size, "token_dtype": self.token_dtype}


def _data_vocab(section: Any) -> int | None:
    """The vocab of the data `section` (a DataSection, or its table as written); None where the section's own checks
    will refuse it. Its corpus is not checked here but once, by the parse (a glob may walk a whole tree)."""
    if isinstance(section, DataSection):
        corpus, options = section.corpus, section
    else:
        table = section if isinstance(section, dict) else {}
        corpus = table.get("corpus", "shakespeare")
        try:
            options = DataSection.model_validate({k: v for k, v in table.items() if k in ("tokenizer", "vocab_size")})
        except ValidationError:
            return None
    try:
        return corpus_vocab(corpus, options.tokenizer, options.vocab_size) if isinstance(corpus, str) else None
    except TaskError:
        return None


def _exists(path: str) -> bool:
    """A name too long for the file system, or holding a NUL byte, names no file (os.stat raises for both)."""
    try:
        return Path(path).exists()
    except (OSError, ValueError):
        return False


@dataclass(frozen=True)
class Objective:
    """What a study can optimise: its direction, and its value in a finished run's result."""

    direction: Literal["minimize", "maximize"]
    of: Callable[[TrainResult], float]


# the speed objective is the trial's paired tokens/s ratio to uniform (search.runner.worker.throughput_ratio): both timed
# in turn in one process, so machine load moves it little; "tokens_per_s" (raw speed, moved 0.73-1.09x by load for one
# schedule) is what earlier studies optimised: they still load, new ones cannot choose it
OBJECTIVES = {
    "val_loss": Objective("minimize", lambda result: result.final_val_loss),
    "throughput": Objective("maximize", lambda result: result.extra[THROUGHPUT_RATIO]),
    "tokens_per_s": Objective("maximize", lambda result: result.tokens_per_s),
}
GRID_LIMIT = 10_000  # schedules a grid may enumerate; beyond this a grid is a mistake, not a search


class SearchSection(_Section):
    sampler: Literal["tpe", "gp", "nsga2", "random", "grid", "additive"] = Field(
        "additive",
        description="Optuna sampler that proposes schedules, seeded by the study seed; grid: every schedule once, in the family's "
        "order; additive: a model of per-layer head counts with a share of random proposals (explore)",
    )
    pruner: Literal["hyperband", "successive-halving", "median", "none"] = Field(
        "hyperband", description="stops weak trials at rungs counted in training tokens; none: every trial trains to the end"
    )
    n_startup_trials: int = Field(4, ge=0, le=10_000, description="random trials before TPE models the space")
    min_resource_evals: Annotated[int, Field(gt=0, le=MAX_STEPS)] | Literal["auto"] = Field(
        1,
        description="pruner's first rung, in evaluations (eval_every steps); 'auto': no pruning before the first rung "
        "whose within-seed rank agreement with the final loss is reliably high in this study's own complete curves",
    )
    reduction_factor: int = Field(3, ge=2, le=100, description="hyperband, successive-halving: 1 in this many trials goes on at each rung")
    explore: float = Field(
        0.25, ge=0, le=1, description="additive: share of proposals drawn at random (so a winner the model ranks low is still found)"
    )
    baseline_seeds: int = Field(
        1,
        ge=1,
        le=MAX_SEEDS,
        description="uniform baseline runs at the study seed, the next seed, ...: only the first pairs with a proposal, the others "
        "measure the noise floor",
    )
    confirmation: Literal["rounds", "manual"] = Field(
        "rounds",
        description="rounds: once the search has its n_trials, the study confirms by itself: round 1 trains its best "
        "confirm_top schedules and uniform on one fresh seed and freezes the best of them, round 2 trains that pick and uniform "
        "on confirm_seeds new seeds, and only those can call it better (docs/benchmarks.md, 'Compute to a correct verdict'); "
        "manual: the search only, then `prism-search confirm` trains what you ask",
    )
    confirm_top: int = Field(3, ge=1, le=100, description="rounds: the schedules round 1 trains beside uniform")
    confirm_seeds: int = Field(4, ge=2, le=MAX_SEEDS - 1, description="rounds: the new seeds round 2 trains the pick and uniform on")
    max_failed_trials: int = Field(3, ge=0, le=10**6, description="stop the run after this many failed trials")
    prior_strength: float = Field(
        0.5, ge=0, le=1, description="with --prior: chance that an early proposal's parameter is drawn near a prior schedule"
    )
    objectives: list[Literal[tuple(OBJECTIVES)]] = Field(  # type: ignore[valid-type]  # the registry's names
        ["val_loss"], description="val_loss first; throughput = tokens/s over uniform's, paired"
    )
    population_size: int = Field(8, ge=2, le=10_000, description="nsga2: individuals per generation")
    min_throughput_ratio: float | None = Field(None, gt=0, le=100, description="tokens/s vs uniform a schedule must reach")
    throughput_probe_steps: int = Field(8, gt=0, le=10_000, description="timed steps per schedule in the tokens/s ratio probe")
    margin: float = Field(
        0.01,
        gt=0,
        le=10,
        description="val-loss gap to uniform (nats) too small to matter: the verdicts' equivalence margin (docs/results.md)",
    )
    racing: bool = Field(False, description="run schedules within the margin of the incumbent again on more paired seeds")
    max_seeds: int = Field(8, ge=3, le=MAX_SEEDS, description="racing: the most seeds a schedule runs on (1, 2, 4, ... up to this)")

    @field_validator("objectives")
    @classmethod
    def _val_loss_first(cls, v: list[str], info: ValidationInfo) -> list[str]:
        if not v or v[0] != "val_loss" or len(set(v)) != len(v):
            raise ValueError(f"{v} must be ['val_loss'] or ['val_loss', 'throughput'] (val_loss first, no repeats)")
        if "tokens_per_s" in v and not (info.context or {}).get("stored"):  # a study created before "throughput"
            raise ValueError("'tokens_per_s' is raw speed, which moves with machine load; use 'throughput' (paired ratio to uniform)")
        return v

    @model_validator(mode="after")
    def _pruner_fits_objectives(self) -> SearchSection:
        if len(self.objectives) > 1 and self.pruner not in ("successive-halving", "none"):
            raise ValueError(
                f"pruner={self.pruner!r} cannot stop multi-objective trials (Optuna prunes single objectives only); "
                "use 'successive-halving' (rung-based early stopping on val_loss) or 'none'"
            )
        return self


class ResourcesSection(_Section):
    workers: int = Field(2, gt=0, le=10_000, description="trials that train at once (Ray workers)")
    cpus_per_trial: int = Field(1, gt=0, le=4096, description="CPU cores, and torch threads, of each trial")
    gpus_per_trial: float = Field(0.0, ge=0, le=1, description="a GPU (1), a fraction of one (0.25: four trials share it), or 0: CPU")
    max_retries: int = Field(2, ge=0, le=100, description="re-runs of a trial whose worker died (pre-emption, OOM kill)")

    @field_validator("gpus_per_trial", mode="before")
    @classmethod
    def _one_gpu_at_most(cls, v: object) -> object:
        # before the bound's check, whose message would not say why (a non-number is left to the type check)
        # Ray would reserve them all while the trial trains on one (no data parallelism): the rest would idle
        if isinstance(v, int | float) and not isinstance(v, bool) and 1 < v < math.inf:
            raise ValueError(
                f"{v:g} GPUs: must be less than or equal to 1, as a trial trains on one GPU (no data-parallel training) and the "
                "others would sit idle; "
                "use 1 (one trial per GPU) or a fraction such as 0.5 (two trials share one)"
            )
        return v


class ExperimentSection(_Section):
    """A pre-registered paired experiment (search.analysis.sequential): `run` trains only `schedule` and uniform at
    the study seed, the next seed, ..., a pair at a time with both runs at once, and reads the test at each look."""

    schedule: str = Field(min_length=1, max_length=1000, description="the schedule compared with uniform, e.g. 2x3,4x3")
    looks: list[Annotated[int, Field(ge=MIN_LOOK, le=MAX_SEEDS)]] = Field(
        [10, 15, 20], min_length=1, max_length=20, description="completed pairs at each look, increasing; the last is the most pairs"
    )
    alpha: float = Field(0.05, gt=0, lt=0.5, description="each test's error rate over all looks (alpha / looks per look)")

    @field_validator("looks")
    @classmethod
    def _increasing(cls, v: list[int]) -> list[int]:
        if any(b <= a for a, b in itertools.pairwise(v)):
            raise ValueError(f"{v} must increase strictly (fix: e.g. [10, 15, 20])")
        return v


TRACKING_DEFAULTS = {"mlflow": "sqlite:///mlflow.db", "tensorboard": "runs", "wandb": "wandb"}


class TrackingSection(_Section):
    """Experiment trackers that get one run per finished trial (search.tracking); each is an optional extra."""

    mlflow: str | None = Field(None, description="tracking URI: sqlite:///mlflow.db, a folder (file store) or http://HOST:5000")
    tensorboard: str | None = Field(None, description="folder for event files, FOLDER/STUDY/trial-NNNNN")
    wandb: str | None = Field(None, description="folder for W&B run files; offline unless WANDB_MODE=online")

    @field_validator("mlflow", "tensorboard", "wandb")
    @classmethod
    def _absolute(cls, v: str | None) -> str | None:
        return v if v is None or ":" in v else str(Path(v).absolute())  # a resume may run from elsewhere

    def with_flags(self, flags: list[str]) -> TrackingSection:
        """`--track NAME[=TARGET]` on top of the config's section (TARGET defaults: TRACKING_DEFAULTS)."""
        update = {}
        for flag in flags:
            name, _, target = flag.partition("=")
            if name not in TRACKING_DEFAULTS:
                shown = f"{name}={mask_url(target)}" if target else name
                raise ConfigError(f"--track {shown!r}: unknown tracker; use {', '.join(TRACKING_DEFAULTS)} (optionally NAME=TARGET)")
            update[name] = target or TRACKING_DEFAULTS[name]
        return TrackingSection.model_validate(self.model_dump() | update)


class StudyConfig(_Section):
    name: str = Field(min_length=1, max_length=100, description="the study's name, also a folder under checkpoint_dir and a dashboard URL")
    seed: int = Field(
        0, ge=0, le=MAX_SEED, description="the search seed: initial weights, data order and validation batches of every search trial"
    )
    n_trials: int = Field(
        18,
        gt=0,
        le=10**6,
        description="trained trials the search runs to, the baselines included (served duplicates and confirmation runs do not count)",
    )
    storage: str = Field(
        DEFAULT_STORAGE, description="SQLAlchemy URL of the study database: SQLite on one machine, PostgreSQL for a cluster"
    )
    keep_checkpoints: Literal["best", "all", "none"] = Field(
        "best",
        description="trained models to keep: the best trial's (and the Pareto front's) with the paired baseline's"
        " (default: `audit STUDY:baseline` works after any study), every trial's (pruned ones too), or none",
    )
    checkpoint_dir: str = Field("checkpoints", validate_default=True, description="checkpoints go to CHECKPOINT_DIR/STUDY-ID/trial-NNNNN")
    model: ModelSection = Field(ModelSection(), description="the Transformer every trial trains")
    space: SpaceSection = Field(SpaceSection(), description="the schedules searched, the uniform baseline and the reference schedules")
    train: TrainSection = Field(TrainSection(), description="how every trial trains")
    data: DataSection = Field(DataSection(), description="the corpus (or a synthetic task) and its tokenizer")
    search: SearchSection = Field(SearchSection(), description="sampler, pruner, seeds, the verdicts' margin and racing")
    resources: ResourcesSection = Field(ResourcesSection(), description="workers and what each trial gets")
    tracking: TrackingSection = Field(TrackingSection(), description="experiment trackers that log every finished trial")
    experiment: ExperimentSection | None = Field(
        None, description="a pre-registered paired experiment in place of a search (absent: a search)"
    )
    trainer: TrainerSection = Field(
        PrismTrainer(), description="who trains each trial: prism's own loop, your command or your Python function (docs/own-model.md)"
    )
    # resolved once (by the validation, or on first use in a copy that changed the model or the space) and read by
    # every caller
    _model_config: ModelConfig | None = PrivateAttr(None)
    _family: ScheduleFamily | None = PrivateAttr(None)
    _baseline: Schedule | None = PrivateAttr(None)

    @field_validator("name")
    @classmethod
    def _one_path_component(cls, v: str) -> str:
        """The name is a folder of checkpoint_dir and a URL path segment: `..` or `a/b` would leave both."""
        if not _NAME.fullmatch(v):
            raise ValueError(f"{v!r} is not a plain name (fix: letters, digits, '_', '.' and '-', starting with a letter, digit or '_')")
        return v

    @field_validator("checkpoint_dir")
    @classmethod
    def _absolute(cls, v: str) -> str:
        return str(Path(v).absolute())  # workers write there from their own working directory

    @model_validator(mode="before")
    @classmethod
    def _vocab_from_data(cls, data: Any) -> Any:
        """A model whose vocab_size the config leaves out embeds the data's vocabulary (prism.corpus_vocab): a
        task's own tokens, the BPE's size, the token files' declared vocab, else the 256 bytes. A task of 20 tokens
        trained with 256 embeddings is a different, harder model.
        Input the fields' own checks will refuse is left to them."""
        if not isinstance(data, dict):
            return data
        model = data.get("model", {})
        given = model.model_fields_set if isinstance(model, ModelSection) else model if isinstance(model, dict) else {"vocab_size"}
        vocab = None if "vocab_size" in given else _data_vocab(data.get("data", {}))
        if vocab is None:
            return data
        model = model.model_copy(update={"vocab_size": vocab}) if isinstance(model, ModelSection) else model | {"vocab_size": vocab}
        return data | {"model": model}

    @model_validator(mode="after")
    def _schedules_fit(self, info: ValidationInfo) -> StudyConfig:
        """Checks the schedules the config names against its model, and resolves the model config, the uniform
        baseline and the schedule space once for every later reader. Not in `_check_overridden`'s pass over the
        file's own fields: rules between fields are the parse's, and the space is built once per command."""
        if (info.context or {}).get("fields_only"):
            return self
        cfg = self.model_config_
        allowed = allowed_head_counts(cfg)
        if self.space.baseline_heads is not None and self.space.baseline_heads not in allowed:
            raise ValueError(
                f"space.baseline_heads={self.space.baseline_heads} is not allowed for d_model={cfg.d_model} and "
                f"head dims [{cfg.dh_min}, {cfg.dh_max}]; use one of {allowed}"
            )
        for text in self.space.references:
            try:
                validate(parse_reference(text, cfg.n_layer, allowed, self.baseline.heads[0]).schedule, cfg)
            except (ScheduleError, ValueError) as e:
                raise ValueError(f"space.references {text!r}: {e}") from None
        try:
            family = self.family
        except ValueError as e:
            raise ValueError(f"space.family={self.space.family!r}: {e}") from None
        if refused := self.trainer.refuses(family.name):
            raise ValueError(f"trainer: {refused}")
        if self.trainer.kind == "prism":  # prism's own loop reads all of [train]; an own trainer only steps, eval_every, batch_size
            try:
                self.train.to_train_config(seed=0)  # TrainConfig's own cross-field checks (warmup below steps)
            except ValueError as e:
                raise ValueError(f"train.{e}") from None
        if self.search.sampler == "grid" and family.size() > GRID_LIMIT:
            raise ValueError(
                f"search.sampler='grid' cannot enumerate the {family.size():,} schedules of the {family.name!r} space "
                f"(limit {GRID_LIMIT:,}); use sampler 'tpe' or a smaller space"
            )
        if self.experiment is not None:
            self._experiment_fits(cfg)
        return self

    def _experiment_fits(self, cfg: ModelConfig) -> None:
        """An experiment trains its pairs and nothing else, two runs at a time: whatever else the config would
        queue or sample is refused, so the pre-registered plan is all that runs."""
        assert self.experiment is not None
        try:
            schedule = Schedule.parse(self.experiment.schedule)
            validate(schedule, cfg)
        except (ScheduleError, ValueError) as e:
            raise ValueError(f"experiment.schedule {self.experiment.schedule!r}: {e}") from None
        if schedule == self.baseline:
            raise ValueError(f"experiment.schedule {self.experiment.schedule!r} is the uniform baseline itself; name another schedule")
        pairs = self.experiment.looks[-1]
        checks = [
            (self.n_trials == 2 * pairs, f"n_trials={self.n_trials}: an experiment trains 2 runs per pair (fix: n_trials = {2 * pairs})"),
            (
                self.resources.workers == 2,
                f"resources.workers={self.resources.workers}: both runs of a pair train at once (fix: workers = 2)",
            ),
            (
                self.search.baseline_seeds == 1,
                "search.baseline_seeds: an experiment's uniform runs are its pairs' (fix: baseline_seeds = 1)",
            ),
            (not self.space.references, "space.references: an experiment trains only its pairs (fix: remove them)"),
            (not self.search.racing, "search.racing: an experiment is its own race (fix: racing = false)"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(message)

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> StudyConfig:
        """A copy with `update` applied unchecked (pydantic's); one that changes the model or the space resolves
        their values anew on first use, so no copy carries another config's schedule space."""
        copy = super().model_copy(update=update, deep=deep)
        if update and {"model", "space"} & update.keys():
            copy._model_config = copy._family = copy._baseline = None
        return copy

    @property
    def model_config_(self) -> ModelConfig:
        """The model every trial of the study trains (prism's ModelConfig)."""
        if self._model_config is None:
            self._model_config = self.model.to_model_config()
        return self._model_config

    @property
    def baseline(self) -> Schedule:
        """The uniform schedule every other one is compared with, paired per seed: uniform heads at head dim 64
        (GPT-2's choice) unless configured, the nearest allowed count otherwise."""
        if self._baseline is None:
            cfg = self.model_config_
            heads = self.space.baseline_heads or default_baseline_heads(cfg)
            self._baseline = Schedule.uniform(heads, cfg.n_layer)
        return self._baseline

    @property
    def family(self) -> ScheduleFamily:
        """The schedule space the config declares (search.families)."""
        if self._family is None:
            self._family = make_family(self.space.family, self.model.n_layer, allowed_head_counts(self.model_config_), self.space.late_zone)
        return self._family


def default_baseline_heads(cfg: ModelConfig) -> int:
    """The uniform baseline's head count when a study names none: head dim 64 (GPT-2's choice), or the allowed count
    nearest to it."""
    return min(allowed_head_counts(cfg), key=lambda h: abs(cfg.d_model // h - 64))


def references_for(config: StudyConfig) -> list[Reference]:
    counts = config.family.counts
    return [parse_reference(text, config.model.n_layer, counts, config.baseline.heads[0]) for text in config.space.references]
