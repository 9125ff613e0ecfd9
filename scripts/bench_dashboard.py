"""Server time of the dashboard's pages on a 5,000-trial study (target: study page < 1 s).

    .venv/bin/python scripts/bench_dashboard.py [--trials 5000] [--db /tmp/prism_bench_dashboard.db] [--repeat 5]

The study is built once through the Optuna API (`tests.search.synthetic`: the attrs the driver writes,
including learning curves, workers and pruned/failed/running trials) and kept in --db for later runs: Optuna's
RDB writes cost ~0.2 s per trial here, so the first run spends minutes building. Server time is the time the
WSGI app takes from request to body bytes, measured in-process:
- cold: a fresh dashboard's first request (reads every trial from the database; `prism-search dashboard` does
  this read in the background at start-up, so users rarely wait for it);
- warm: later requests of the same dashboard, which is what each live refresh costs (Optuna's cached storage
  re-reads only unfinished trials; rows of finished trials and the layer importance are reused until a trial
  finishes).
One request after a trial completes measures a live refresh that has to recompute; requests through the real
threaded HTTP server check that the transport adds little. Each run adds that one trial to the --db study.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import optuna

from search.config import parse_config
from search.dashboard import Dashboard, make_server_for
from search.storage import open_storage
from tests.search.synthetic import synthetic_study

NAME = "bench"


def bench_config(n_trials: int):
    """A search that could plausibly reach 5,000 trials: 6 layers, 1..8 heads, 6 evaluations per trial."""
    return parse_config(
        {
            "name": NAME,
            "n_trials": n_trials,
            "model": {"n_layer": 6, "d_model": 256, "block_size": 128, "dh_min": 32, "dh_max": 256},
            "train": {"steps": 600, "eval_every": 100, "warmup_steps": 60},
            "search": {"sampler": "random", "baseline_seeds": 50},
        }
    )


def ensure_study(url: str, n_trials: int) -> None:
    storage = open_storage(url)
    try:
        have = len(optuna.load_study(study_name=NAME, storage=storage).trials)
        print(f"reusing {url}: study {NAME!r} with {have} trials")
        return
    except KeyError:
        pass
    started = time.perf_counter()
    synthetic_study(bench_config(n_trials), storage, n_trials, running=4, failed=20, workers=8)
    print(f"built study {NAME!r} with {n_trials} finished trials in {time.perf_counter() - started:.0f} s (Optuna add_trials on SQLite)")


def request(app: Dashboard, path: str) -> tuple[float, int, str]:
    status = []
    path, _, query = path.partition("?")
    started = time.perf_counter()
    body = b"".join(app({"REQUEST_METHOD": "GET", "PATH_INFO": path, "QUERY_STRING": query}, lambda s, h: status.append(s)))
    return time.perf_counter() - started, len(body), status[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=5000)
    ap.add_argument("--db", default="/tmp/prism_bench_dashboard.db")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    url = f"sqlite:///{args.db}"
    ensure_study(url, args.trials)
    print(f"load average (1 min) while measuring: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")

    app = Dashboard(url)
    cold_s, size, status = request(app, f"/study/{NAME}")
    assert status.startswith("200"), status
    print(f"\nstudy page, cold (fresh dashboard: reads all trials from the database): {cold_s:.3f} s, {size:,} bytes")
    rows = []
    for label, path in [
        ("study page", f"/study/{NAME}"),
        ("studies list", "/"),
        ("trial page", f"/study/{NAME}/trial/{args.trials // 2}"),
        ("refresh poll", f"/api/stamp?study={NAME}"),
    ]:
        request(app, path)
        warm = [request(app, path) for _ in range(args.repeat)]
        assert all(s.startswith("200") for _, _, s in warm), path
        rows.append((label, statistics.median(t for t, _, _ in warm), max(t for t, _, _ in warm), warm[0][1]))
    print(f"\n{'warm page':<14} {'median (s)':>11} {'max (s)':>9} {'bytes':>11}")
    for label, med, worst, size in rows:
        print(f"{label:<14} {med:>11.3f} {worst:>9.3f} {size:>11,}")

    # a live study: one more trial completes (written through Optuna, as the driver would), then the page refreshes
    study = optuna.load_study(study_name=NAME, storage=app.storage())
    done = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))[-1]
    study.add_trial(
        optuna.trial.create_trial(
            params=done.params,
            distributions=done.distributions,
            value=done.value,
            user_attrs=done.user_attrs,
            intermediate_values=done.intermediate_values,
        )
    )
    changed_s = request(app, f"/study/{NAME}")[0]
    print(f"study page right after a trial completed (new row, layer importance recomputed): {changed_s:.3f} s")

    server = make_server_for(url, "127.0.0.1", 0, app=app)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    http = f"http://127.0.0.1:{server.server_port}/study/{NAME}"
    urllib.request.urlopen(http).read()
    times = []
    for _ in range(args.repeat):
        started = time.perf_counter()
        urllib.request.urlopen(http).read()
        times.append(time.perf_counter() - started)
    server.shutdown()
    print(f"\nstudy page over HTTP (threaded wsgiref server, warm): median {statistics.median(times):.3f} s")
    print(f"load average (1 min) at the end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
