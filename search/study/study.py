"""`Study`: the one way into prism-search from Python; the CLI is a thin layer over it.

A `Study` is a handle on one named study in one storage. Each command that trains resolves its context here, once
(the config with the caller's settings on top, the cluster, the corpus's fingerprint, the trackers, then the
opened study with its schedule space: search.runner.context.StudyContext), and hands it to the study's private
lifecycle (search.study._lifecycle), which drives the trials. Ctrl-C and SIGTERM are caught here alone. Reading
methods (`summary`, `verdict`, `trials`, `best_schedule`) never write to the storage.

Ray and torch are imported only by the methods that train.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from search.config import Flags, StudyConfig, check_in_effect, parse_config, read_toml, storage_or_default
from search.errors import ConfigError, PrismSearchError, StudyInterrupted
from search.study.create import reopen_study

if TYPE_CHECKING:
    import optuna
    from optuna.trial import FrozenTrial

    from prism import Schedule
    from prism.data import CorpusFacts
    from search.analysis import Forecast, Summary
    from search.analysis.rows import TrialRow
    from search.analysis.summary import ConfirmationRow
    from search.analysis.verdict import Verdict
    from search.runner.progress import StudyProgress
    from search.study.policy import Standing
    from search.tracking import Tracker

T = TypeVar("T")


class Study:
    """A prism-search study: a config, the storage its trials live in, and what they decided.

    Make one with `Study.create` (from a config or a TOML file; nothing is stored before `run`) or `Study.load`
    (a stored study, by name). `run` and `resume` train until the study has its target of trained trials,
    `confirm` re-trains the best schedules on fresh seeds, and `summary` / `verdict` read the result. Progress goes
    to a `StudyProgress` (search.runner.progress); by default log lines on the `search` logger.

    Example:
        >>> from search import Study
        >>> study = Study.create("studies/tiny.toml", storage="sqlite:///:memory:")
        >>> study.name, study.config.n_trials
        ('tiny', 5)

    A stored study (`prism-search run` made it, or `Study.run`) is read back by name::

        study = Study.load("quickstart")            # storage: sqlite:///prism_search.db
        print(verdict_text(study.verdict(), study.name))  # from search import verdict_text
        study.confirm(top=1, seeds=3)               # fresh seeds for the best schedule and uniform
    """

    def __init__(self, name: str, storage: str, *, raw: dict | None = None, source: str = "config", config: StudyConfig | None = None):
        """Use `Study.create` or `Study.load`. `raw`: a config not parsed yet (the TOML's tables); `config`: one
        already parsed; neither: the study is read from `storage`."""
        self.name, self.storage = name, storage
        self._raw, self._source, self._config = raw, source, config
        self._optuna: optuna.Study | None = None
        self._open = False  # this handle opened the study to train it: an interrupt needs no database read to know it is stored
        self._readable: tuple[tuple, tuple[list[FrozenTrial], dict[int, str]]] | None = None  # the last `_read`
        self._summary: tuple[object, Summary] | None = None  # the last summary, with the `_read` entry it was made from
        self.wall_s: float | None = None  # the last run's, resume's or confirmation's training time (None: nothing ran)

    # -- making one ------------------------------------------------------------------------------------------------
    @classmethod
    def create(cls, config: StudyConfig | str | os.PathLike[str], *, storage: str | None = None) -> Study:
        """A new study, or a stored one of the same name that `run` continues (its config must match).

        Args:
            config: a StudyConfig, or the path of a study TOML file (read here, checked when first used).
            storage: SQLAlchemy URL of the database (default: the config's `storage`).

        Returns:
            The study; nothing is stored until `run`.

        Raises:
            ConfigError: the file cannot be read, or its `storage` is no URL.
        """
        if isinstance(config, StudyConfig):
            return cls(config.name, storage or config.storage, raw=config.model_dump(), source=f"config of {config.name!r}", config=config)
        path = Path(config)
        raw = read_toml(path)
        name = raw.get("name")
        url = storage_or_default(storage or raw.get("storage"))
        if not isinstance(url, str):  # the parse would see the study's storage in its place: it names the field now
            parse_config(raw, str(path))
        # an unparsed config: its errors (a missing name too) come from the one parse, when the study is used
        return cls(name if isinstance(name, str) else "", url, raw=raw, source=str(path))

    @classmethod
    def load(cls, name: str, *, storage: str | None = None) -> Study:
        """The stored study `name`; its stored config (no TOML) is what it trains with.

        Args:
            name: the study's name (its config's `name`).
            storage: SQLAlchemy URL of the database (default: sqlite:///prism_search.db).

        Returns:
            The study, opened when first used: `Study.load(...).resume(address=...)` checks the cluster address
            against the storage before reading it.
        """
        return cls(name, storage_or_default(storage))

    @classmethod
    def all(cls, storage: str | None = None) -> tuple[list[Study], list[str], dict[str, str]]:
        """Every study prism-search created in `storage`, the names of those another tool made there, and why each
        study whose own stored data (name, directions, attrs) is damaged cannot be opened, by name: one damaged study
        never hides the others, and none is left out unsaid.

        Args:
            storage: SQLAlchemy URL of the database (default: sqlite:///prism_search.db).
        """
        from search.analysis import stored_studies, unreadable_studies

        url = storage_or_default(storage)
        found, others = stored_studies(url)
        studies = []
        for stored in found:
            study = cls(stored.study_name, url)
            study._optuna = stored
            studies.append(study)
        return studies, others, unreadable_studies(url)

    # -- what it is ------------------------------------------------------------------------------------------------
    @property
    def config(self) -> StudyConfig:
        """The study's config as the last command resolved it (the stored one for a loaded study)."""
        return self._config if self._config is not None else self._resolve(Flags())

    @property
    def optuna_study(self) -> optuna.Study:
        """The stored Optuna study, for Optuna's own tools (visualization, optuna-dashboard); read it, don't write it."""
        if self._optuna is None:
            from search.analysis import stored_study

            self._optuna = stored_study(self.name, self.storage)
        return self._optuna

    def _resolve(self, flags: Flags) -> StudyConfig:
        """The config with `flags` on top, parsed once: from the unparsed config, or from the stored study."""
        given = self._config
        if given is not None and given.storage == self.storage and flags == Flags():
            return given  # a config the caller parsed, used as it is
        flags = Flags(storage=self.storage, n_trials=flags.n_trials, workers=flags.workers, track=flags.track)
        if self._raw is not None:
            self._config = parse_config(self._raw, self._source, flags=flags)
            check_in_effect(self._config, self._source)  # a config to make a study from: each setting must act
            self.name = self._config.name
        else:
            from search.storage.records import stored_config

            self._config = stored_config(self.optuna_study, flags)
        return self._config

    # -- training --------------------------------------------------------------------------------------------------
    def run(
        self,
        n_trials: int | None = None,
        *,
        workers: int | None = None,
        address: str | None = None,
        track: tuple[str, ...] | list[str] = (),
        prior: str | None = None,
        progress: StudyProgress | None = None,
    ) -> Summary:
        """Create the study (or continue it) and train until it has `n_trials` trained trials.

        Args:
            n_trials: total trained trials to reach (default: the config's).
            workers: trials trained at once (default: resources.workers).
            address: a Ray cluster, HOST:PORT or "auto" (default: start a local Ray); needs a network storage.
            track: trackers to log every finished trial to: "mlflow", "tensorboard", "wandb", or NAME=URI.
            prior: a prior file from `prism-search prior`, or "auto" (audit the trained baseline and seed from it).
            progress: where progress goes (default: search.runner.progress.LogProgress).

        Returns:
            The study's summary after the run (`.verdict` first).

        Raises:
            PrismSearchError: a config, storage, cluster or corpus that cannot be used, before any compute.
            StudyInterrupted: Ctrl-C or SIGTERM; in-flight trials were queued again (`.stored`: resume it).
        """
        if self._raw is None:
            raise PrismSearchError(f"study {self.name!r} was loaded from its storage; continue it with resume()")
        flags = Flags(n_trials=n_trials, workers=workers, track=tuple(track))
        return self._interruptible(lambda: self._train(flags, address, progress, prior=prior), address, stored=None)

    def resume(
        self,
        n_trials: int | None = None,
        *,
        workers: int | None = None,
        address: str | None = None,
        track: tuple[str, ...] | list[str] = (),
        progress: StudyProgress | None = None,
    ) -> Summary:
        """Continue a stored study with its stored config until it has `n_trials` trained trials; trials a dead
        driver left running are trained again, and so are the baseline and reference runs that failed for good
        (a fixed trainer trains them; a divergence repeats). Arguments as `run`.

        Returns:
            The study's summary after the run.
        """
        flags = Flags(n_trials=n_trials, workers=workers, track=tuple(track))
        return self._interruptible(lambda: self._train(flags, address, progress, resuming=True), address, stored=True)

    def confirm(
        self,
        top: int = 5,
        seeds: int = 3,
        *,
        workers: int | None = None,
        address: str | None = None,
        track: tuple[str, ...] | list[str] = (),
        progress: StudyProgress | None = None,
    ) -> list[ConfirmationRow]:
        """Re-train the `top` best schedules and uniform on `seeds` fresh seeds, never searched on, and compare
        each with uniform, paired per seed. Runs an earlier confirmation trained are not trained again.

        Returns:
            One row per schedule (uniform first): seeds, mean val loss, paired gap to uniform and its verdict.

        Raises:
            PrismSearchError: nothing to confirm yet, or a storage or cluster that cannot be used.
            StudyInterrupted: Ctrl-C or SIGTERM; the runs finished so far are stored.
        """
        from search.storage import driver_lock
        from search.study._lifecycle import confirm
        from search.study.rounds import check_confirmable

        def work() -> list[ConfirmationRow]:
            config = self._resolve(Flags(workers=workers, track=tuple(track)))
            check_confirmable(self.optuna_study, config)  # before any compute
            corpus, trackers = self._edge(config, address)
            ctx = reopen_study(self.optuna_study, config, corpus.fingerprint, trackers, fix="confirm where the study's corpus is")
            started = time.monotonic()
            with driver_lock(config.storage):
                rows = confirm(ctx, top, seeds, address, progress or _default_progress(), corpus)
            self.wall_s = time.monotonic() - started
            return rows

        return self._interruptible(work, address, stored=True)

    def delete(self) -> Path | None:
        """Remove the study from its storage, and its folder (checkpoint_dir/NAME-UID: the trials' models, an outside
        trainer's trial folders). Other studies in the storage are left as they are.

        Returns:
            The folder that was removed (None: the study had none).

        Raises:
            StorageError: a driver holds the SQLite file (it trains this study or another one there).
            PrismSearchError: the study has trials a live driver is training (PostgreSQL); stop it first.
        """
        import shutil

        import optuna

        from search.attrs import ATTR_STUDY_UID
        from search.runner.checkpoints import study_folder
        from search.storage import driver_lock, stale_trial_ids, trial_id

        with driver_lock(self.storage):
            study = self.optuna_study
            stale = set(stale_trial_ids(study))
            live = [t.number for t in study.get_trials(deepcopy=False) if t.state.name == "RUNNING" and trial_id(t) not in stale]
            if live:
                raise PrismSearchError(
                    f"study {self.name!r} has trials a live driver is training ({', '.join(map(str, live))}); "
                    "fix: stop its run (Ctrl-C, or `ray job stop`), then delete it"
                )
            folder = study_folder(self.config, study.user_attrs.get(ATTR_STUDY_UID))
            optuna.delete_study(study_name=self.name, storage=self.storage)
        self._optuna, self._summary, self._readable = None, None, None
        if not folder.is_dir():
            return None
        shutil.rmtree(folder)
        return folder

    def _edge(self, config: StudyConfig, address: str | None, *, keep_checkpoints: bool = False) -> tuple[CorpusFacts, tuple[Tracker, ...]]:
        """What a command that trains checks once, before anything is stored: the corpus and this machine (what the
        corpus holds) and the trackers. `keep_checkpoints`: the baselines of `--prior auto` keep theirs."""
        from search.runner.preflight import preflight
        from search.study._lifecycle import keeping_checkpoints
        from search.tracking import make_trackers

        corpus = preflight(keeping_checkpoints(config) if keep_checkpoints else config, address=address)
        return corpus, tuple(make_trackers(config.tracking))  # a missing tracker library fails here, before any compute

    def _train(
        self,
        flags: Flags,
        address: str | None,
        progress: StudyProgress | None,
        *,
        prior: str | None = None,
        resuming: bool = False,
    ) -> Summary:
        """`run` and `resume` (`resuming`): the study's context, resolved once here, then its trials driven."""
        from search.storage import driver_lock
        from search.study._lifecycle import AutoPrior, drive, open_to_run, parse_prior

        config = self._resolve(flags)
        choice = parse_prior(prior, config)  # a prior file is checked before anything is stored
        if choice is not None and config.experiment is not None:
            raise ConfigError("--prior: an experiment trains only its pre-registered pairs (fix: drop --prior)")
        corpus, trackers = self._edge(config, address, keep_checkpoints=isinstance(choice, AutoPrior))
        progress = progress or _default_progress()
        with driver_lock(config.storage):
            resumed = self.optuna_study if resuming else None
            ctx = open_to_run(config, corpus.fingerprint, trackers, progress, resumed=resumed)
            self._optuna, self._open = ctx.study, True
            self.wall_s = drive(ctx, address, progress=progress, prior=choice, corpus=corpus)
        return self.summary()

    def _interruptible(self, work: Callable[[], T], address: str | None, *, stored: bool | None) -> T:
        """Every command that trains goes through here: the cluster at `address` checked against the storage, then
        `work`. The one place a Ctrl-C or SIGTERM of a study's command is caught: it becomes `StudyInterrupted`, which
        says whether the study is stored (`stored`; None: the study is asked, unless this command opened it). A Ray
        the command started is stopped when it ends (search.runner.cluster.ray_owned)."""
        from search.analysis.stored import is_stored
        from search.runner.cluster import check_cluster, ray_owned
        from search.signals import sigterm_as_ctrl_c

        try:
            with sigterm_as_ctrl_c(), ray_owned():
                check_cluster(address, self.storage)  # before a stored study is read: a cluster's workers need a storage they reach
                return work()
        except StudyInterrupted:
            raise
        except KeyboardInterrupt as interrupt:
            if stored is None:  # a run told apart by whether the study is stored (its config marks it created)
                stored = self._open or is_stored(self.name, self.storage)
            raise StudyInterrupted(stored=stored) from interrupt

    # -- reading ---------------------------------------------------------------------------------------------------
    def summary(self) -> Summary:
        """Everything `status` shows: the verdict, the best schedule, every schedule's paired gap to uniform.
        Computed once per state of the study's trials: `verdict` and `best_schedule` reuse it."""
        from search.analysis import summarize

        read = self._read()  # a new entry whenever the trials changed
        if self._summary is None or self._summary[0] is not read:
            self._summary = (read, summarize(self.optuna_study, self.config, read[1]))
        return self._summary[1]

    def standing(self) -> Standing:
        """Where the study's policies stand: why it stopped short of n_trials (the space ran out), and each
        schedule's position in its race (racing studies)."""
        from search.study.policy import Standing

        return Standing.of(self._read()[1][0], self.config)

    def _read(self) -> tuple[tuple, tuple[list[FrozenTrial], dict[int, str]]]:
        """The state of the study's trials, and the trials a reader can use with why each other one cannot
        (`readable`): checked once per state, for the summary and the standing alike."""
        from search.storage.records import readable

        trials = self.optuna_study.get_trials(deepcopy=False)
        state = tuple((t.number, t.state, t.datetime_complete, len(t.user_attrs)) for t in trials)
        if self._readable is None or self._readable[0] != state:
            self._readable = (state, readable(trials))
        return self._readable

    def verdict(self) -> Verdict:
        """What the study decided: better, uniform holds at the margin, equivalent, or undecided (and what decides it)."""
        return self.summary().verdict

    def best_schedule(self) -> Schedule | None:
        """The best schedule by paired gap to uniform (uniform itself when nothing beats it); None before any trial."""
        from prism import Schedule

        best = self.summary().best_schedule
        return None if best is None else Schedule.parse(best)

    def trials(self) -> list[TrialRow]:
        """Every finished trial, oldest first, as typed rows: the rows `export` writes and the dashboard shows."""
        from search.analysis.rows import finished_rows

        return finished_rows(self.optuna_study, self.config)

    def export(self, fmt: str = "csv") -> str:
        """Every finished trial as `fmt` text: "csv" (one column per layer's head count) or "json"."""
        from search.study.export import render

        return render(self.optuna_study, self.config, fmt)

    def export_schedule(self, which: str, fmt: str = "json") -> str:
        """One schedule as your own model code loads it (docs/own-model.md): `which` is "best", "verdict" or a trial
        number; `fmt` one of SCHEDULE_FORMATS (json, hf, nanogpt)."""
        from search.study.export import render_schedule

        return render_schedule(self.optuna_study, self.config, which, fmt)

    def forecast(
        self, *, noise_from: str | None = None, sd: float | None = None, margin: float | None = None, tokens_per_s: float | None = None
    ) -> Forecast:
        """What a verdict at the margin would cost (paired seeds, runs, tokens, hours), before any compute.

        Args:
            noise_from: a stored study whose paired noise to use (default: this study's own, when stored).
            sd: the sd of one paired difference, stated instead.
            margin: the gap to resolve (default: the config's search.margin).
            tokens_per_s: training tokens/s of one run (default: the pilot's stored runs, else timed here).

        Raises:
            ConfigError: a figure that is not above 0, both noise sources, an experiment's config, or no noise.
        """
        from search.study.planning import check_flags, forecast_study

        check_flags(noise_from=noise_from, sd=sd, margin=margin, tokens_per_s=tokens_per_s)
        return forecast_study(self.config, self._source, noise_from=noise_from, sd=sd, margin=margin, tokens_per_s=tokens_per_s)

    def __repr__(self) -> str:
        from search.outputs.urls import mask_url

        return f"Study({self.name!r}, storage={mask_url(self.storage)!r})"


def _default_progress() -> StudyProgress:
    from search.runner.progress import LogProgress

    return LogProgress()
