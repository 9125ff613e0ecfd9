"""Reading a large study: `status`, `best`, `export`, `report` and the dashboard, side by side at 500 and 5,000 trials.

    .venv/bin/python scripts/bench_dashboard.py [--trials 500 5000] [--db-dir /tmp] [--repeat 5]

Each study (50 uniform baselines on 50 seeds, a random search of 6 layers x 1..8 heads, 6 evaluations per trial,
pruned, failed and running trials) is built once through the Optuna API (`tests.search.synthetic`: the attrs the
driver writes) and kept in DB-DIR/prism_bench_dashboard_N.db for later runs: Optuna's RDB writes cost ~0.2 s per
trial here, so a first run spends minutes building. What is measured:
- `status`, `best`, `export`, `report`: the command as a user runs it (a fresh process, imports included), wall time;
- study page cold: a fresh dashboard's first request (reads every trial; `prism-search dashboard` does this read in
  the background at start-up), server time in-process; warm: the median of later requests (a live refresh);
- 20-way: 20 requests at once for the study page, over HTTP, on a fresh server (each one's time, median and max):
  the dashboard computes a study once per change and the 20 share it; then 40 requests by 20 clients;
- `/api/stamp`: what every open page polls every 5 s (warm, median);
- the study page right after one more trial completed (its row and the figures recomputed).
Each run adds that one trial to each study.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import optuna

from search.config import parse_config
from search.dashboard import Dashboard, make_server_for
from search.storage import open_storage
from tests.search.synthetic import synthetic_study

ROOT = Path(__file__).resolve().parents[1]
NAME = "bench"
TARGETS = {  # at 5,000 trials (docs/benchmarks.md)
    "status": "< 2 s",
    "best": "< 2 s",
    "export": "< 2 s",
    "study page, cold": "< 1 s",
    "study page, warm": "< 0.2 s",
    "20 at once, median": "< 2x cold",
    "20 at once, max": "< 2x cold",
}


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
    finally:
        storage.engine.dispose()
    started = time.perf_counter()
    synthetic_study(bench_config(n_trials), url, n_trials, running=4, failed=20, workers=8)
    print(f"built study {NAME!r} with {n_trials} finished trials in {time.perf_counter() - started:.0f} s (Optuna add_trials on SQLite)")


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def command(url: str, *args: str) -> tuple[float, float, int]:
    """Wall and CPU time of `prism-search ARGS --storage URL` in a fresh process, and the bytes it printed."""
    started, cpu = time.perf_counter(), _children_cpu()
    done = subprocess.run([sys.executable, "-m", "search.cli", *args, "--storage", url], capture_output=True, cwd=ROOT, check=True)
    return time.perf_counter() - started, _children_cpu() - cpu, len(done.stdout)


def request(app: Dashboard, path: str) -> tuple[float, float, int]:
    """Wall and CPU time (this thread's) of one request to the WSGI app, and the bytes of its body."""
    status = []
    path, _, query = path.partition("?")
    started, cpu = time.perf_counter(), time.thread_time()
    body = b"".join(app({"REQUEST_METHOD": "GET", "PATH_INFO": path, "QUERY_STRING": query}, lambda s, h: status.append(s)))
    assert status[0].startswith("200"), status
    return time.perf_counter() - started, time.thread_time() - cpu, len(body)


def _median(runs: list[tuple[float, float, int]]) -> tuple[float, float | None]:
    return statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)


def at_once(url: str, n: int, clients: int) -> list[float]:
    """Each request's time when `n` requests for the study page come from `clients` clients, on a fresh server."""
    app = Dashboard(url)
    server = make_server_for(url, "127.0.0.1", 0, app)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    page = f"http://127.0.0.1:{server.server_port}/study/{NAME}"
    gate = threading.Barrier(min(n, clients))

    def one(i: int) -> float:
        if i < clients:
            gate.wait()
        started = time.perf_counter()
        urllib.request.urlopen(page, timeout=600).read()
        return time.perf_counter() - started

    try:
        with ThreadPoolExecutor(clients) as pool:
            return list(pool.map(one, range(n)))
    finally:
        server.shutdown()
        server.server_close()
        app.close()


def measure(url: str, repeat: int) -> dict[str, tuple[float, float | None, str]]:
    """Every measurement of one study: (wall seconds, CPU seconds where one process did the work, a note)."""
    out: dict[str, tuple[float, float | None, str]] = {}
    for label, args in [("status", ["status"]), ("best", ["best", NAME]), ("export", ["export", NAME])]:
        runs = [command(url, *args) for _ in range(max(1, repeat // 2))]
        out[label] = (*_median(runs), f"{runs[0][2] / 1e6:.1f} MB out" if label == "export" else "")
    with tempfile.TemporaryDirectory() as folder:
        html = Path(folder) / "report.html"
        wall, cpu, _ = command(url, "report", NAME, "-o", str(html))
        out["report"] = (wall, cpu, f"{html.stat().st_size / 1e6:.1f} MB")
    app = Dashboard(url)
    wall, cpu, size = request(app, f"/study/{NAME}")
    out["study page, cold"] = (wall, cpu, f"{size / 1e6:.1f} MB")
    out["study page, warm"] = (*_median([request(app, f"/study/{NAME}") for _ in range(repeat)]), "")
    out["/api/stamp"] = (*_median([request(app, f"/api/stamp?study={NAME}") for _ in range(repeat)]), "")
    twenty = at_once(url, 20, 20)
    out["20 at once, median"] = (statistics.median(twenty), None, "over HTTP, fresh server")
    out["20 at once, max"] = (max(twenty), None, "")
    forty = at_once(url, 40, 20)
    out["40 by 20 clients, median"] = (statistics.median(forty), None, "over HTTP, fresh server")

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
    wall, cpu, _ = request(app, f"/study/{NAME}")
    out["study page after a trial completed"] = (wall, cpu, "")
    app.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, nargs="+", default=[500, 5000])
    ap.add_argument("--db-dir", default="/tmp")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    urls = {n: f"sqlite:///{Path(args.db_dir) / f'prism_bench_dashboard_{n}.db'}" for n in args.trials}
    for n, url in urls.items():
        ensure_study(url, n)
    warm_imports()
    print(f"load average (1 min) before measuring: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    results = {n: measure(url, args.repeat) for n, url in urls.items()}
    print(f"load average (1 min) at the end: {os.getloadavg()[0]:.1f}")
    small, large = min(results), max(results)
    print("\nwall seconds (CPU seconds of the one process doing the work), median of the repeats")
    print(f"| measured | {' | '.join(f'{n:,} trials' for n in results)} | {large:,} / {small:,} | target at {large:,} |")
    print(f"|---|{'---:|' * len(results)}---:|---|")
    for label in results[small]:
        cells = []
        for n in results:
            wall, cpu, note = results[n][label]
            cells.append(f"{wall:.3f}" + (f" ({cpu:.2f})" if cpu is not None else "") + (f", {note}" if note else ""))
        ratio = results[large][label][0] / results[small][label][0]
        print(f"| {label} | {' | '.join(cells)} | {ratio:.1f}x | {TARGETS.get(label, '')} |")


def warm_imports() -> None:
    """What a running dashboard has imported before its first page (its start-up warm-up): the cold page measures
    reading and computing, not Python loading plotly, SciPy and Optuna's importance module (seconds here)."""
    import optuna.importance  # noqa: F401
    import plotly.graph_objects  # noqa: F401
    import scipy.stats  # noqa: F401


if __name__ == "__main__":
    main()
