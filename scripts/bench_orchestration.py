"""Per-trial orchestration overhead: prism-search's driver vs Ray Tune + OptunaSearch, on a trivial trainer.

No trial trains anything: the worker answers at once with the shape of a real trial (one evaluation point per
`eval_every` steps of studies/tiny.toml, then a result), so what is timed is ask + dispatch + report and
should_prune + tell + database writes, per trial. Both sides use the same study config, the same TPE sampler,
the same storage factory (`search.storage.open_storage`) and the same synthetic learning curves.

    pip install -e ".[bench]"   # Ray Tune
    .venv/bin/python scripts/bench_orchestration.py [--trials 40] [--tune-trials 12] [--workers 1 2 4]

Per trial = the steady-state interval between trial completions as the driver process sees them (the Driver's
progress callback, Tune's `on_trial_complete`): (t_last - t_k) / (n - 1 - k), skipping the first k = workers
completions (the first wave, which waits for worker start-up: process spawn, torch import). Also printed: wall time / trials
including that start-up, the driver process's CPU seconds per trial, and the peak number of PostgreSQL
connections to the study's database (`pg_stat_activity`), with one extra PostgreSQL run of 8 workers.
"""

from __future__ import annotations

import argparse
import functools
import os
import socket
import tempfile
import threading
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

import ray
import sqlalchemy

from prism import EvalPoint, Schedule, TrainResult
from search.config import load_config
from search.runner.driver import Driver
from search.runner.messages import Evaluated, Finished, Started
from search.runner.preflight import check_corpus
from search.runner.worker import TrialSession, TrialSpec
from search.storage import open_storage
from search.storage.records import FINISHED
from search.study.create import open_study
from search.study.pruning import make_stopping
from search.study.samplers import make_sampler

ROOT = Path(__file__).resolve().parents[1]
PG_ADMIN = os.environ.get("PRISM_BENCH_POSTGRES", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")


def echo_curve(schedule: str, steps: int, eval_every: int) -> list[tuple[int, float]]:
    """A deterministic learning curve per schedule, so the pruner and TPE have something to compare."""
    heads = Schedule.parse(schedule).heads
    shape = 0.05 * sum(abs(h - heads[0]) for h in heads) + 0.01 * heads[-1]
    return [(s, 2.0 + shape + 5.0 / s) for s in range(eval_every, steps + 1, eval_every)]


class EchoSession(TrialSession):
    """The trivial trainer: answers each `advance` at once with the next point of `echo_curve`."""

    def start(self, spec: TrialSpec) -> Started:
        self.spec, self.curve = spec, echo_curve(spec.schedule, spec.train.steps, spec.train.eval_every)
        self.points: list[EvalPoint] = []
        return Started({"host": socket.gethostname(), "pid": os.getpid(), "device": "none"})

    def advance(self) -> Evaluated | Finished:
        if len(self.points) == len(self.curve):
            return self.stop()
        step, loss = self.curve[len(self.points)]
        self.points.append(EvalPoint(step, step * self.spec.train.batch_size * self.spec.model.block_size, loss, loss))
        return Evaluated(self.points[-1])

    def stop(self) -> Finished:
        last = self.points[-1]
        return Finished(TrainResult(self.spec.schedule, last.val_loss, self.points, 0.0, 0, 0, 0.0, last.step, last.tokens))


class _Clock:
    """Stands in for the Driver's Progress: notes when each trial is told."""

    def __init__(self) -> None:
        self.done: list[float] = []

    def started_trial(self, *_) -> None:
        pass

    def evaluated(self, *_) -> None:
        pass

    def finished(self, *_) -> None:
        self.done.append(time.perf_counter())


@contextmanager
def _storage_url(kind: str, tmp: Path):
    if kind == "sqlite":
        yield f"sqlite:///{tmp / f'{uuid.uuid4().hex}.db'}"
        return
    name = f"prism_bench_{uuid.uuid4().hex[:12]}"
    admin = sqlalchemy.create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT", poolclass=sqlalchemy.pool.NullPool)
    with admin.connect() as conn:
        conn.execute(sqlalchemy.text(f'CREATE DATABASE "{name}"'))
    try:
        yield f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}"
    finally:
        with admin.connect() as conn:
            conn.execute(sqlalchemy.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@contextmanager
def _peak_connections(url: str):
    """Samples pg_stat_activity for the study's database every 50 ms; yields a one-item list holding the peak."""
    peak, stop = [0], threading.Event()
    if not url.startswith("postgresql"):
        yield peak
        return

    def sample() -> None:
        engine = sqlalchemy.create_engine(PG_ADMIN, poolclass=sqlalchemy.pool.NullPool)
        query = sqlalchemy.text("SELECT count(*) FROM pg_stat_activity WHERE datname = :db")
        with engine.connect() as conn:
            while not stop.is_set():
                peak[0] = max(peak[0], conn.execute(query, {"db": url.rsplit("/", 1)[1]}).scalar_one())
                conn.rollback()
                time.sleep(0.05)
        engine.dispose()

    thread = threading.Thread(target=sample)
    thread.start()
    try:
        yield peak
    finally:
        stop.set()
        thread.join()


def _steady(done: list[float], workers: int) -> float:
    k = min(workers, len(done) - 2)
    return (done[-1] - done[k]) / (len(done) - 1 - k)


def bench_driver(config, fingerprint: str, url: str, workers: int, n: int) -> dict:
    config = config.model_copy(update={"n_trials": n, "storage": url})
    ctx = open_study(config, open_storage(url), fingerprint)
    study = ctx.study
    clock = _Clock()
    with _peak_connections(url) as peak:
        wall, cpu = time.perf_counter(), time.process_time()
        Driver(ctx, clock, stopping=make_stopping(ctx), session_cls=EchoSession).run(n, workers)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    assert len(study.get_trials(deepcopy=False, states=FINISHED)) == n
    return {"per_trial": _steady(clock.done, workers), "wall_per_trial": wall / n, "cpu_per_trial": cpu / n, "connections": peak[0]}


def _tune_space(family, trial) -> dict:
    """OptunaSearch's define-by-run space: the same family.suggest the Driver calls (module level: Tune pickles it)."""
    return {"schedule": str(family.suggest(trial))}


def bench_tune(config, url: str, workers: int, n: int, tmp: Path, reuse_actors: bool) -> dict:
    from ray import tune
    from ray.tune.search.optuna import OptunaSearch

    steps, every = config.train.steps, config.train.eval_every
    family = config.family

    def objective(params: dict) -> None:
        for step, loss in echo_curve(params["schedule"], steps, every):
            tune.report({"val_loss": loss, "step": step})

    class TuneClock(tune.Callback):
        def __init__(self) -> None:
            self.done: list[float] = []

        def on_trial_complete(self, *args, **kwargs) -> None:
            self.done.append(time.perf_counter())

    clock = TuneClock()
    search = OptunaSearch(
        functools.partial(_tune_space, family),
        metric="val_loss",
        mode="min",
        sampler=make_sampler(config, family),
        study_name=f"tune-{uuid.uuid4().hex[:8]}",
        storage=open_storage(url),
    )
    tuner = tune.Tuner(
        objective,
        tune_config=tune.TuneConfig(search_alg=search, num_samples=n, max_concurrent_trials=workers, reuse_actors=reuse_actors),
        run_config=tune.RunConfig(storage_path=str(tmp / "tune"), verbose=0, callbacks=[clock]),
    )
    with _peak_connections(url) as peak:
        wall, cpu = time.perf_counter(), time.process_time()
        results = tuner.fit()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    assert len(results) == n and not results.errors
    return {"per_trial": _steady(clock.done, workers), "wall_per_trial": wall / n, "cpu_per_trial": cpu / n, "connections": peak[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=40, help="trials per prism-search run")
    parser.add_argument("--tune-trials", type=int, default=12, help="trials per Ray Tune run (seconds each)")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--storages", nargs="+", default=["sqlite", "postgresql"])
    parser.add_argument(
        "--tune-reuse-actors",
        action="store_true",
        help="Tune keeps trial processes alive between trials, as the Driver does (default: Tune's own default, off)",
    )
    args = parser.parse_args()

    config = load_config(ROOT / "studies" / "tiny.toml")
    fingerprint = check_corpus(config)
    load = os.getloadavg()
    print(f"machine: {os.cpu_count()} cores, load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} (1/5/15 min)")
    print(
        f"study: studies/tiny.toml, {config.train.steps // config.train.eval_every} evaluation reports per trial, "
        f"{config.search.sampler} sampler, {config.search.pruner} pruner (prism only: OptunaSearch never prunes)"
    )
    ray.init(num_cpus=max(8, *args.workers), include_dashboard=False, log_to_driver=False)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        runs = [(w, s) for w in args.workers for s in args.storages]
        tune_name = "Ray Tune + OptunaSearch" + (" (reuse_actors)" if args.tune_reuse_actors else "")
        if "postgresql" in args.storages:
            runs.append((8, "postgresql"))
        for workers, kind in runs:  # interleaved: both systems see the same machine load
            with _storage_url(kind, tmp) as url:
                rows.append(("prism-search Driver", kind, workers, bench_driver(config, fingerprint, url, workers, args.trials)))
            print(_fmt(*rows[-1]), flush=True)
            if workers in args.workers:
                with _storage_url(kind, tmp) as url:
                    result = bench_tune(config, url, workers, args.tune_trials, tmp, args.tune_reuse_actors)
                    rows.append((tune_name, kind, workers, result))
                print(_fmt(*rows[-1]), flush=True)
    load = os.getloadavg()
    print(f"load average after: {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}")
    print("\n| system | storage | workers | s/trial (steady) | s/trial (wall, incl. start-up) | driver CPU s/trial | peak PG connections |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for system, kind, workers, r in rows:
        conns = str(r["connections"]) if kind == "postgresql" else "-"
        print(f"| {system} | {kind} | {workers} | {r['per_trial']:.3f} | {r['wall_per_trial']:.3f} | {r['cpu_per_trial']:.3f} | {conns} |")
    ray.shutdown()


def _fmt(system: str, kind: str, workers: int, r: dict) -> str:
    return (
        f"{system:40s} {kind:10s} workers={workers}: {r['per_trial']:.3f} s/trial steady, "
        f"{r['wall_per_trial']:.3f} s/trial wall, {r['cpu_per_trial']:.3f} driver CPU s/trial, "
        f"peak connections {r['connections']}"
    )


if __name__ == "__main__":
    main()
