"""A config read once per command: the TOML file or a study's stored JSON, the command line's flags on top, checked
and parsed into a StudyConfig."""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import (
    ValidationError,
)

from prism.config import EARLIER_DEFAULTS
from search.config.schema import DEFAULT_STORAGE, STORAGE_ENV, StudyConfig
from search.config.wording import field_loc, format_validation_error
from search.errors import ConfigError


def storage_or_default(given: str | None) -> str:
    """The database a command uses: `given` (--storage, or the TOML's `storage`), else $PRISM_SEARCH_STORAGE, else
    the SQLite file in the working directory."""
    if given:
        return given
    env = os.environ.get(STORAGE_ENV)
    if env is not None and not env.strip():
        raise ConfigError(f"{STORAGE_ENV} is set but empty; name a database URL such as {DEFAULT_STORAGE}, or unset it")
    return env or DEFAULT_STORAGE


@dataclass(frozen=True)
class Flags:
    """What a command line may put on top of a config, checked by the same bounds as the file (`--storage`,
    `--n-trials`: n_trials, `--workers`: resources.workers, `--track`: tracking). None: keep the config's."""

    storage: str | None = None
    n_trials: int | None = None
    workers: int | None = None
    track: tuple[str, ...] = ()

    def flag_of(self, loc: tuple) -> str | None:
        """The flag that set the field at `loc` (a validation error's location), if one did."""
        fields: dict[tuple, tuple[str, object]] = {
            ("storage",): ("--storage", self.storage),
            ("n_trials",): ("--n-trials", self.n_trials),
            ("resources", "workers"): ("--workers", self.workers),
        }
        flag, value = fields.get(loc[:2] if loc[:1] == ("resources",) else loc[:1], (None, None))
        return flag if value else None

    def overridden(self) -> list[tuple[str, ...]]:
        """Where in a config the flags put their values: the fields they replace."""
        fields = [(("storage",), self.storage), (("n_trials",), self.n_trials), (("resources", "workers"), self.workers)]
        return [loc for loc, value in fields if value]

    def applied(self, data: dict) -> dict:
        """`data` (a config as TOML or JSON holds it) with the flags on top that the config's own validation
        checks (--track is checked by its section: TrackingSection.with_flags)."""
        data = dict(data)
        if self.storage:
            data["storage"] = self.storage
        if self.n_trials:
            data["n_trials"] = self.n_trials
        if self.workers:
            resources = data.get("resources", {})
            data["resources"] = (resources if isinstance(resources, dict) else {}) | {"workers": self.workers}
        return data


# What a study stored before its section had these fields meant: it resumes with the strategy it was created with.
SEARCH_EARLIER_DEFAULTS = {"search": {"confirmation": "manual"}}


def parse_config(data: dict, source: str = "config", stored: bool = False, flags: Flags | None = None) -> StudyConfig:
    """The one parse of a config per command. `stored`: the config a study was created with, already checked then;
    the disk is not consulted again, and a field it leaves out whose default changed since means what it meant then
    (prism.config.EARLIER_DEFAULTS, SEARCH_EARLIER_DEFAULTS). `flags`: the command line's, applied before the parse (their errors name the
    command line)."""
    if flags is not None and not stored:
        _check_overridden(data, flags, source)
    if flags is not None:
        data = flags.applied(data)
    if stored:
        data = data | {
            name: earlier | data.get(name, {})
            for name, earlier in (EARLIER_DEFAULTS | SEARCH_EARLIER_DEFAULTS).items()
            if isinstance(data.get(name, {}), dict)
        }
    try:
        config = StudyConfig.model_validate(data, context={"stored": stored})
    except ValidationError as e:
        flag = flags.flag_of(tuple(e.errors()[0]["loc"])) if flags is not None else None
        raise ConfigError(format_validation_error(e.errors(), f"{source} with the command line's {flag}" if flag else source)) from None
    if flags is not None and flags.track:
        config = config.model_copy(update={"tracking": config.tracking.with_flags(list(flags.track))})
    return config


def _check_overridden(data: dict, flags: Flags, source: str) -> None:
    """A field a flag replaces is still checked as the file wrote it: `storage = 5` is a mistake in the file
    whatever `--storage` says, and the next run without the flag would meet it. The file's other fields are
    checked by the parse itself; rules between fields are checked with the flags' values."""
    overridden = flags.overridden()
    if not overridden:
        return

    def replaced(error: Any) -> bool:
        field = field_loc(tuple(error["loc"]))  # empty: a rule between fields
        return bool(field) and any(field[: len(loc)] == loc[: len(field)] for loc in overridden)

    try:
        StudyConfig.model_validate(data, context={"fields_only": True})
    except ValidationError as e:
        if errors := [error for error in e.errors() if replaced(error)]:
            raise ConfigError(format_validation_error(errors, source)) from None


def read_toml(path: str | Path) -> dict:
    """A study TOML file's tables, not validated yet, or a one-line ConfigError."""
    path = Path(path)
    if path.is_dir():
        raise ConfigError(
            f"study config {str(path)!r} is a folder (fix: pass the path of a .toml file in it, such as studies/quickstart.toml)"
        )
    if not path.is_file():
        raise ConfigError(f"study config {str(path)!r} not found; pass the path of a .toml file such as studies/quickstart.toml")
    try:
        return tomllib.loads(path.read_text(encoding="utf-8-sig"))  # -sig: a byte order mark some editors write
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: not valid TOML ({e}); fix the syntax") from None
    except RecursionError:
        raise ConfigError(f"{path}: arrays or tables nested too deeply to read; fix: flatten them") from None


def load_config(path: str | Path, flags: Flags | None = None) -> StudyConfig:
    """The one config loader: TOML file (and the command line's `flags`) -> validated StudyConfig, or a one-line
    ConfigError."""
    return parse_config(read_toml(path), str(path), flags=flags)


def check_in_effect(config: StudyConfig, source: str) -> None:
    """Refuse a setting of a new study that could never act, which it would otherwise run with for hours. Checked
    where a study is made from a config only: `train --steps` may shorten its one run below the pruner's first rung
    (one run prunes nothing), and a stored study opens as it was made."""
    search, train = config.search, config.train
    evals = train.steps // train.eval_every
    if search.pruner != "none" and search.min_resource_evals != "auto" and search.min_resource_evals > evals:
        raise ConfigError(
            f"{source}: search.min_resource_evals={search.min_resource_evals}: a run has only {evals} evaluations (train.steps "
            f"{train.steps} / train.eval_every {train.eval_every}), so the pruner would never act (fix: at most {evals}, "
            '"auto", or pruner = "none")'
        )
    if search.min_throughput_ratio is not None and search.min_throughput_ratio > 1:
        raise ConfigError(
            f"{source}: search.min_throughput_ratio={search.min_throughput_ratio:g} would make uniform itself (ratio 1) "
            "infeasible, and every gap is paired with uniform's run (fix: at most 1, e.g. 0.98: keep most of uniform's tokens/s)"
        )
    if config.experiment is not None and search.pruner != "none":
        raise ConfigError(
            f"{source}: search.pruner={search.pruner!r}: an experiment's pairs train to the end, a pruned run is no pair "
            '(fix: pruner = "none")'
        )
