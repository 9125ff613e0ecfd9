"""A 5,000-trial study at first sight: the dashboard and the reading commands, as a user starts them, in one run.

    .venv/bin/python scripts/bench_dashboard.py [--trials 500 5000] [--db-dir /tmp] [--repeat 5] [--browser]

Each study (50 uniform baselines on 50 seeds, a random search of 6 layers x 1..8 heads, 6 evaluations per trial,
pruned, 4 running and 20 failed trials) is built through the Optuna API as the driver stores trials
(`tests.search.synthetic`: drawn on an in-memory study with the driver's attrs, then `add_trials` on SQLite), timed
on its own line, and kept in DB-DIR/prism_bench_dashboard_N.db for later runs (Optuna's RDB writes cost minutes).
Everything runs in fresh processes of the real CLI (`python -m search.cli`, imports included), over HTTP:
- `dashboard --port 0`: start to listening (the line it prints once bound), and the CPU it had spent by then;
- first study page: requested the moment it listens (its start-up read of the study may still be running), its
  wall time, size, and the server's CPU from start to that answer; every request takes gzip, as a browser's does;
- later study page: the median of REPEAT requests; `/api/stamp`, what an open page polls every 5 s;
- 20 at once: 20 simultaneous requests for the study page on that warm server, against one alone (the later
  page's median), and on a fresh server the moment it listens, against the first page alone (the mean of the
  first one and of another fresh server's, right after);
- the study page right after one more trial completed (its row, summary and figures recomputed);
- `status`, `best`, `export` (median of REPEAT // 2), `report`: wall and CPU time of the command.
Each run adds that one trial to each study. `--browser`: then the largest study's page in headless Chromium (what
each figure drew, console errors, load time).
"""

from __future__ import annotations

import argparse
import gzip
import os
import re
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import optuna

from search.config import parse_config
from search.storage import open_storage
from tests.search.synthetic import synthetic_study

ROOT = Path(__file__).resolve().parents[1]
NAME = "bench"
AT_ONCE = 20
TICK = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Target:
    """A bound on a measurement at the largest size: `limit` seconds (or bytes), or `limit` x another measurement."""

    limit: float
    of: str | None = None  # the measurement the limit multiplies
    text: str = ""

    def bound(self, results: dict[str, Measured]) -> float:
        return self.limit * (results[self.of].value if self.of else 1.0)


TARGETS = {  # at 5,000 trials (issue 49, part 6)
    "dashboard start to listening": Target(3.0, text="< 3 s"),
    "first study page": Target(2.0, text="< 2 s"),
    "first study page, bytes": Target(1e6, text="< 1 MB"),
    "later study page, median": Target(0.3, text="< 0.3 s"),
    "20 at once, warm: slowest": Target(2.0, "later study page, median", "<= 2x one alone"),
    "20 at once, fresh server: slowest": Target(2.0, "first study page alone, before and after", "<= 2x the first alone"),
    "status": Target(2.0, text="< 2 s"),
    "best": Target(2.0, text="< 2 s"),
    "export": Target(2.0, text="< 2 s"),
    "report": Target(5.0, text="< 5 s"),
}


@dataclass(frozen=True)
class Measured:
    value: float  # wall seconds, or bytes
    cpu: float | None = None  # CPU seconds of the process doing the work, where one process did it
    note: str = ""

    def text(self, label: str) -> str:
        if label.endswith("bytes"):
            return f"{self.value / 1e6:.2f} MB" + (f", {self.note}" if self.note else "")
        return f"{self.value:.3f}" + (f" ({self.cpu:.2f})" if self.cpu is not None else "") + (f", {self.note}" if self.note else "")


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


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "search.cli", *args]


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def command(url: str, *args: str) -> Measured:
    """Wall and CPU time of `prism-search ARGS --storage URL` in a fresh process."""
    started, cpu = time.perf_counter(), _children_cpu()
    done = subprocess.run(_cli(*args, "--storage", url), capture_output=True, cwd=ROOT, check=True)
    return Measured(
        time.perf_counter() - started, _children_cpu() - cpu, f"{len(done.stdout) / 1e6:.1f} MB out" if args[0] == "export" else ""
    )


def _cpu_of(pid: int) -> float:
    """CPU seconds a running process has spent so far (user + system, from /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / TICK


class Server:
    """`prism-search dashboard --port 0` in a fresh process: started, timed to listening, and stopped with SIGTERM."""

    def __init__(self, url: str):
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(_cli("dashboard", "--storage", url, "--port", "0"), cwd=ROOT, stderr=subprocess.PIPE, text=True)
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            if found := re.search(r"on http://127\.0\.0\.1:(\d+)/", line):
                self.listening = time.perf_counter() - self.started
                self.cpu_listening = _cpu_of(self.proc.pid)
                self.base = f"http://127.0.0.1:{found.group(1)}"
                return
        raise RuntimeError(f"the dashboard exited with {self.proc.wait()} before listening")

    def get(self, path: str) -> tuple[float, int, int]:
        """Wall time of one request as a browser makes it (taking gzip), the bytes on the wire and the page's."""
        started = time.perf_counter()
        with urllib.request.urlopen(urllib.request.Request(self.base + path, headers={"Accept-Encoding": "gzip"}), timeout=600) as answer:
            wire = answer.read()
            body = gzip.decompress(wire) if answer.headers["Content-Encoding"] == "gzip" else wire
        return time.perf_counter() - started, len(wire), len(body)

    def at_once(self, path: str, n: int = AT_ONCE) -> list[float]:
        """Each one's wall time when `n` clients, each on its own thread, all ready, request `path` at once."""
        ready = threading.Barrier(n)

        def one(_: int) -> float:
            ready.wait()
            return self.get(path)[0]

        with ThreadPoolExecutor(n) as pool:
            return list(pool.map(one, range(n)))

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=60)


def add_one_trial(url: str) -> None:
    """One more completed trial, as a running study gets one (a copy of the last completed one)."""
    storage = open_storage(url)
    try:
        study = optuna.load_study(study_name=NAME, storage=storage)
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
    finally:
        storage.engine.dispose()


def _spread(times: list[float]) -> Measured:
    return Measured(max(times), note=f"median {statistics.median(times):.3f}")


def measure(url: str, repeat: int) -> dict[str, Measured]:
    """Every measurement of one study."""
    out: dict[str, Measured] = {}
    page = f"/study/{NAME}"
    server = Server(url)
    try:
        out["dashboard start to listening"] = Measured(server.listening, server.cpu_listening)
        wall, wire, size = server.get(page)
        out["first study page"] = Measured(wall, _cpu_of(server.proc.pid), "CPU: the server's since start")
        out["first study page, bytes"] = Measured(size, note=f"{wire / 1e6:.2f} MB gzipped on the wire")
        out["later study page, median"] = Measured(statistics.median(server.get(page)[0] for _ in range(repeat)))
        out["/api/stamp, median"] = Measured(statistics.median(server.get(f"/api/stamp?study={NAME}")[0] for _ in range(repeat)))
        out["20 at once, warm: slowest"] = _spread(server.at_once(page))
        add_one_trial(url)
        out["study page after a trial completed"] = Measured(server.get(page)[0])
    finally:
        server.stop()
    fresh = Server(url)
    try:
        out["20 at once, fresh server: slowest"] = _spread(fresh.at_once(page))
    finally:
        fresh.stop()
    again = Server(url)  # one alone once more, right after: the load on a shared machine moves within a run
    try:
        first = [out["first study page"].value, again.get(page)[0]]
        out["first study page alone, before and after"] = Measured(statistics.mean(first), note=" and ".join(f"{t:.3f}" for t in first))
    finally:
        again.stop()
    for label, args in [("status", ["status"]), ("best", ["best", NAME]), ("export", ["export", NAME])]:
        runs = [command(url, *args) for _ in range(max(1, repeat // 2))]
        out[label] = Measured(statistics.median(r.value for r in runs), statistics.median(r.cpu or 0 for r in runs), runs[0].note)
    with tempfile.TemporaryDirectory() as folder:
        html = Path(folder) / "report.html"
        run = command(url, "report", NAME, "-o", str(html))
        out["report"] = Measured(run.value, run.cpu, f"{html.stat().st_size / 1e6:.1f} MB")
    return out


def in_browser(url: str) -> None:
    """The largest study's page in headless Chromium (the browser tests' settings), opened twice (the second time
    with plotly.js cached, as on any later visit): the time from navigation to the network going idle, console
    errors, what each figure drew, and the page's notes on what it left out."""
    from playwright.sync_api import sync_playwright

    from tests.search.dashboard.test_browser import CHROMIUM, DRAWN, FLAGS

    server = Server(url)
    try:
        server.get(f"/study/{NAME}")  # the server's first read: the browser meets the page as any later visitor does
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
            tab = browser.new_page(viewport={"width": 1400, "height": 900})
            errors: list[str] = []
            tab.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            tab.on("pageerror", lambda e: errors.append(str(e)))
            took = []
            for _ in range(2):
                started = time.perf_counter()
                tab.goto(f"{server.base}/study/{NAME}")
                tab.wait_for_load_state("networkidle")
                took.append(time.perf_counter() - started)
            print(f"\nChromium: loaded and drawn in {took[0]:.2f} s, {took[1]:.2f} s with plotly.js cached", end="; ")
            print(f"console errors: {errors or 'none'}")
            for figure in tab.evaluate(DRAWN):
                print(f"  {figure['id']}: {figure['traces']} traces, {figure['values']} values, {figure['marks']} marks drawn")
            for note in tab.locator(".sampled").all_inner_texts():
                print(f"  note: {note}")
            browser.close()
    finally:
        server.stop()


def _verdict(label: str, results: dict[str, Measured]) -> str:
    """The target's cells: the target, the measurement as a share of its bound (a ratio target: the ratio too), met?"""
    target = TARGETS.get(label)
    if target is None:
        return " | "
    share = results[label].value / target.bound(results)
    ratio = f"{results[label].value / results[target.of].value:.1f}x, " if target.of else ""
    return f"{target.text} | {ratio}{share:.2f} of the bound: {'met' if share <= 1 else '**missed**'}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, nargs="+", default=[500, 5000])
    ap.add_argument("--db-dir", default="/tmp")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--browser", action="store_true", help="then open the largest study's page in headless Chromium")
    args = ap.parse_args()
    urls = {n: f"sqlite:///{Path(args.db_dir) / f'prism_bench_dashboard_{n}.db'}" for n in args.trials}
    for n, url in urls.items():
        ensure_study(url, n)
    print(f"load average (1 min) before measuring: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    started = time.perf_counter()
    results = {n: measure(url, args.repeat) for n, url in urls.items()}
    print(f"load average (1 min) at the end: {os.getloadavg()[0]:.1f}; measuring took {time.perf_counter() - started:.0f} s")
    large = max(results)
    print("\nwall seconds (CPU seconds of the process doing the work); 20 at once: the slowest of the 20 (their median)")
    print(f"| measured | {' | '.join(f'{n:,} trials' for n in results)} | target at {large:,} | at {large:,} |")
    print(f"|---|{'---:|' * len(results)}---|---|")
    for label in results[large]:
        print(f"| {label} | {' | '.join(results[n][label].text(label) for n in results)} | {_verdict(label, results[large])} |")
    if args.browser:
        in_browser(urls[large])


if __name__ == "__main__":
    main()
