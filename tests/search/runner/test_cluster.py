"""Cluster mode on real parts: a two-node Ray cluster started with `ray start` (a head and a second raylet on
this machine), fresh PostgreSQL databases, the real CLI and real training of tiny models."""

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import optuna
import pytest
import sqlalchemy
import torch
from optuna.trial import TrialState

from search.analysis.budget import is_served
from search.errors import ClusterError
from search.runner.cluster import check_cluster
from search.storage.records import FINISHED
from tests.search.conftest import ROOT
from tests.search.runner.cluster_probe import RESOURCES, SHARED_GPUS

PG_ADMIN = os.environ.get("PRISM_TEST_POSTGRES", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
# the cluster runs without token auth: its nodes and drivers are all this test's processes on 127.0.0.1
RAY_ENV = {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
NODE_CPUS = 4  # logical CPUs per node: 8 in all, enough for 8 concurrent trials


def _cli(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "search.cli", *args], capture_output=True, text=True, cwd=ROOT, **kw)


# -- refusals: made before anything runs ----------------------------------------------------------------------
@pytest.mark.e2e
@pytest.mark.parametrize("command", ["run", "resume"])
def test_cluster_with_sqlite_is_refused_before_anything(tmp_path, command):
    db = tmp_path / "never.db"
    target = "studies/tiny.toml" if command == "run" else "tiny"
    result = _cli(command, target, "--address", "127.0.0.1:1", "--storage", f"sqlite:///{db}", timeout=60)
    assert result.returncode == 2
    assert result.stdout == "" and result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert "is a SQLite file on this machine only; pass a network database" in result.stderr
    assert not db.exists()  # refused before the storage was opened (opening creates the file)


def test_check_cluster_accepts_network_storage_and_an_answering_head_and_names_a_bad_address(monkeypatch):
    check_cluster(None, "sqlite:///local.db")  # a local run may use SQLite
    with socket.socket() as head:  # anything that accepts a TCP connection passes the check; Ray itself says the rest
        head.bind(("0.0.0.0", 0))  # every interface: `auto` resolves 127.0.0.1 to the node's own address
        head.listen()
        port = head.getsockname()[1]
        check_cluster(f"127.0.0.1:{port}", "postgresql+psycopg://u@db:5432/prism")
        check_cluster(f"ray://127.0.0.1:{port}", "postgresql+psycopg://u@db:5432/prism")
        monkeypatch.setenv("RAY_ADDRESS", f"127.0.0.1:{port}")  # what `auto` reads first
        check_cluster("auto", "postgresql+psycopg://u@db:5432/prism")
    with pytest.raises(ClusterError, match=r"--address 127.0.0.1:\d+: no Ray head answers"):
        check_cluster(f"127.0.0.1:{port}", "postgresql+psycopg://u@db:5432/prism")  # closed now
    with pytest.raises(ClusterError, match=r"--address '10.0.0.5' is not HOST:PORT"):
        check_cluster("10.0.0.5", "postgresql+psycopg://u@db:5432/prism")


# -- a real two-node cluster ---------------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _names(entry: Path, marker: str) -> bool:
    """The process's command line or one of its open files names `marker` (Ray's agents retitle themselves
    `ray::DashboardAgent` and show the temp dir only in their open log files)."""
    if marker in (entry / "cmdline").read_bytes().decode(errors="replace"):
        return True
    for fd in (entry / "fd").iterdir():
        try:
            if marker in os.readlink(fd):
                return True
        except OSError:
            continue
    return False


def _pids_using(marker: str) -> list[int]:
    """This user's processes that belong to the cluster whose private temp dir is `marker`."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if entry.stat().st_uid == os.getuid() and _names(entry, marker):
                pids.append(int(entry.name))
        except OSError:
            continue
    return pids


def _stop_cluster(temp_dir: str) -> None:
    """Stop only this cluster's processes: `ray stop` would also stop other Ray instances of this user."""
    for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 2.0)):
        for pid in _pids_using(temp_dir):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + wait
        while _pids_using(temp_dir) and time.monotonic() < deadline:
            time.sleep(0.2)
    shutil.rmtree(temp_dir, ignore_errors=True)


@pytest.mark.e2e
def test_a_trial_no_node_can_hold_is_noted_then_refused_after_a_bounded_wait(ray_local, monkeypatch):
    """On a joined cluster a trial that fits no live node would wait forever on a fixed cluster: the run says so at
    once, waits PRISM_SEARCH_UNFIT_WAIT_S for a node to join (as an autoscaler adds one), then stops with one line
    (ray_local: one node of 2 CPUs, no GPU)."""
    from search.runner.cluster import unfit_trial_note, wait_for_a_fitting_node

    assert unfit_trial_note(2, 0) is None
    note = unfit_trial_note(1000, 0)
    assert note.startswith("note: no node of this cluster has 1000 CPUs for one trial now (the largest: 2 CPUs, 0 GPUs)")
    assert "waiting up to 300 s" in note and "has 1 CPUs and 0.5 GPUs" in unfit_trial_note(1, 0.5)
    said: list[str] = []
    wait_for_a_fitting_node(2, 0, said.append)
    assert said == []  # a node fits: no word, no wait
    monkeypatch.setenv("PRISM_SEARCH_UNFIT_WAIT_S", "2")
    started = time.monotonic()
    refusal = r"^no node of this cluster has 1000 CPUs for one trial \(the largest: 2 CPUs, 0 GPUs\), still after 2 s"
    with pytest.raises(ClusterError, match=refusal):
        wait_for_a_fitting_node(1000, 0, said.append, poll_s=0.2)
    assert 2 <= time.monotonic() - started < 10 and len(said) == 1 and said[0].startswith("note: no node")
    monkeypatch.setenv("PRISM_SEARCH_UNFIT_WAIT_S", "soon")
    with pytest.raises(ClusterError, match="PRISM_SEARCH_UNFIT_WAIT_S='soon' is not a whole number"):
        wait_for_a_fitting_node(1000, 0, said.append)


@pytest.fixture(scope="module")
def ray_cluster():
    """`ray start --head --port P` plus `ray start --address 127.0.0.1:P`: two raylets, each with NODE_CPUS
    logical CPUs and one logical GPU (Ray schedules GPU fractions without a real device)."""
    temp_dir = tempfile.mkdtemp(prefix="rc5", dir="/tmp")  # short: Ray's socket paths must stay under 108 chars
    port = _free_port()
    ray_bin = str(Path(sys.executable).parent / "ray")
    node = ["--num-cpus", str(NODE_CPUS), "--num-gpus", "1", "--temp-dir", temp_dir, "--disable-usage-stats"]
    try:
        for args in (["--head", "--port", str(port), "--include-dashboard", "false"], ["--address", f"127.0.0.1:{port}"]):
            subprocess.run([ray_bin, "start", *args, *node], env=RAY_ENV, check=True, capture_output=True, timeout=180)
        yield f"127.0.0.1:{port}"
    finally:
        _stop_cluster(temp_dir)


def _finished_and_workers(url: str) -> tuple[list, list[dict]]:
    trials = optuna.load_study(study_name="tiny", storage=url).get_trials()
    assert not [t for t in trials if t.state in (TrialState.RUNNING, TrialState.WAITING)]
    trained = [t for t in trials if t.state in FINISHED and not is_served(t)]  # what n_trials counts
    return trained, [t.user_attrs["worker"] for t in trials if "worker" in t.user_attrs]


def _run_probe(*args: str) -> None:
    """tests/search/runner/cluster_probe.py in a process of its own (this one may hold the session's Ray)."""
    result = subprocess.run(
        [sys.executable, "-m", "tests.search.runner.cluster_probe", *args],
        env=RAY_ENV,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.e2e
@pytest.mark.xdist_group("ray_cluster")  # both on one pytest worker: one two-node cluster (--dist loadgroup)
def test_trial_resources_from_the_config_reach_the_workers(ray_cluster, pg_url):
    _run_probe(ray_cluster, pg_url)
    finished, workers = _finished_and_workers(pg_url)
    assert len(finished) == 2 and len(workers) == 2
    cpus, gpus = RESOURCES["cpus_per_trial"], RESOURCES["gpus_per_trial"]
    for w in workers:
        assert w["resources"] == {"CPU": cpus, "GPU": gpus}
        assert w["torch_threads"] == cpus  # cpus_per_trial reaches torch, not only Ray's bookkeeping
        assert w["cuda_visible_devices"] == "0"  # Ray handed each trial its share of the node's one GPU
    # two trials of 3 CPUs cannot share a 4-CPU node: they ran on both raylets at once
    assert cpus * 2 > NODE_CPUS and len({w["node"] for w in workers}) == 2


def _count_connections(url: str, stop: threading.Event, peak: list[int]) -> None:
    database = url.rsplit("/", 1)[1]
    admin = sqlalchemy.create_engine(PG_ADMIN, poolclass=sqlalchemy.pool.NullPool)
    query = sqlalchemy.text("SELECT count(*) FROM pg_stat_activity WHERE datname = :db")
    with admin.connect() as conn:
        while not stop.is_set():
            peak[0] = max(peak[0], conn.execute(query, {"db": database}).scalar_one())
            conn.rollback()  # a fresh snapshot of pg_stat_activity on the next query
            time.sleep(0.05)
    admin.dispose()


@pytest.mark.e2e
@pytest.mark.xdist_group("ray_cluster")  # both on one pytest worker: one two-node cluster (--dist loadgroup)
def test_cli_runs_eight_trials_at_once_on_two_nodes_with_few_postgres_connections(ray_cluster, pg_url):
    stop, peak_connections = threading.Event(), [0]
    sampler = threading.Thread(target=_count_connections, args=(pg_url, stop, peak_connections))
    sampler.start()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "search.cli",
            "run",
            "studies/tiny.toml",
            "--workers",
            "8",
            "--n-trials",
            "8",
            "--address",
            ray_cluster,
            "--storage",
            pg_url,
        ],
        env=RAY_ENV,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    running, peak_running, lines = set(), 0, []
    try:
        for line in proc.stdout:  # plain log lines: stdout is not a terminal
            lines.append(line)
            if (m := re.search(r"trial (\d+) \(\d+ of \d+\) started", line)) and "(= trial" not in line:  # served ones train nowhere
                running.add(m[1])
            elif m := re.search(r"trial (\d+) (?:\([^)]*\) )?(COMPLETE|PRUNED|FAIL)", line):
                running.discard(m[1])
            peak_running = max(peak_running, len(running))
        proc.wait(timeout=300)
    finally:
        stop.set()
        sampler.join()
    assert proc.returncode == 0, "".join(lines)
    finished, workers = _finished_and_workers(pg_url)
    assert len(finished) == 8 and "gap to uniform" in "".join(lines)
    # more than 4 long-lived workers of 1 CPU each cannot fit on one 4-CPU node: the study ran on both raylets
    # (trials served from the duplicate cache train on no worker, so fewer than 8 may have one)
    assert len({w["pid"] for w in workers}) > NODE_CPUS
    assert {w["kernels"] for w in workers} == {f"cpu {torch.backends.cpu.get_cpu_capability()}"}  # what did the arithmetic
    assert peak_running == 8
    # only the driver talks to the database, through a pool of 2 (+2 overflow): not 15 per worker
    assert 1 <= peak_connections[0] <= 4, peak_connections
    print(f"peak PostgreSQL connections with {peak_running} trials in flight: {peak_connections[0]}")


@pytest.mark.e2e
@pytest.mark.xdist_group("ray_cluster")
def test_a_run_whose_trials_fit_no_node_says_so_and_stops_on_ctrl_c(ray_cluster, pg_url, study_toml):
    """The CLI on the two-node cluster with trials of NODE_CPUS + 1 CPUs: the note is printed before any trial
    starts, while the run waits for a node that could hold one; Ctrl-C then stops it cleanly, nothing trained."""
    toml = study_toml(("workers = 2", f"workers = 1\ncpus_per_trial = {NODE_CPUS + 1}"))
    proc = subprocess.Popen(
        [sys.executable, "-m", "search.cli", "run", str(toml), "--address", ray_cluster, "--storage", pg_url],
        env=RAY_ENV,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True)  # the run waits for a node
    reader.start()
    note = f"note: no node of this cluster has {NODE_CPUS + 1} CPUs for one trial now (the largest: {NODE_CPUS} CPUs, 1 GPUs)"
    deadline = time.monotonic() + 120
    while not any(note in line for line in lines):
        assert time.monotonic() < deadline and proc.poll() is None, "".join(lines)
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=60) == 130
    reader.join(timeout=10)
    out = "".join(lines)
    assert "started" not in out and f"prism-search resume tiny --storage {pg_url}" in out and "Traceback" not in out, out
    trials = optuna.load_study(study_name="tiny", storage=pg_url).get_trials()
    assert trials and not [t for t in trials if t.state in (TrialState.RUNNING, TrialState.COMPLETE)]


@pytest.mark.e2e
@pytest.mark.xdist_group("ray_cluster")
def test_a_run_whose_trials_fit_no_node_stops_with_one_line_after_its_wait(ray_cluster, pg_url, study_toml):
    """Not waited on forever: after PRISM_SEARCH_UNFIT_WAIT_S the run ends with one line and exit 2; the study it
    created keeps its queued runs for a `resume` once a node fits."""
    toml = study_toml(("workers = 2", f"workers = 1\ncpus_per_trial = {NODE_CPUS + 1}"))
    env = RAY_ENV | {"PRISM_SEARCH_UNFIT_WAIT_S": "3"}
    started = time.monotonic()
    done = _cli("run", str(toml), "--address", ray_cluster, "--storage", pg_url, env=env, timeout=180)
    assert done.returncode == 2 and time.monotonic() - started < 120, done.stdout + done.stderr
    (error,) = done.stderr.strip().splitlines()
    assert error.startswith(f"error: no node of this cluster has {NODE_CPUS + 1} CPUs for one trial") and "still after 3 s" in error
    assert "started" not in done.stdout and "Traceback" not in done.stdout + done.stderr
    trials = optuna.load_study(study_name="tiny", storage=pg_url).get_trials()
    assert trials and all(t.state == TrialState.WAITING for t in trials)


# -- GPUs declared to Ray: this machine has none, so Ray's bookkeeping and the refusals are what can be checked ---
@pytest.mark.e2e
def test_two_trials_share_each_of_two_gpus_at_half_a_gpu(tmp_path):
    """A local Ray declaring 2 GPUs (a separate process: this one may hold the session's Ray), 4 workers at
    gpus_per_trial = 0.5: all four hold their share at once, two per GPU, each seeing only its GPU."""
    url = f"sqlite:///{tmp_path / 'gpus.db'}"
    _run_probe("gpus=2", url)
    _, workers = _finished_and_workers(url)
    by_pid = {w["pid"]: w for w in workers}  # a long-lived worker may train more than one trial
    assert len(by_pid) == SHARED_GPUS["workers"]  # four actors held their half GPU at the same time
    assert all(w["resources"] == {"CPU": 1, "GPU": 0.5} for w in by_pid.values())
    seen = sorted(w["cuda_visible_devices"] for w in by_pid.values())
    assert seen == ["0", "0", "1", "1"]  # two trials per GPU, each told its own


@pytest.mark.e2e
@pytest.mark.xdist_group("ray_cluster")
def test_a_gpu_study_on_nodes_whose_torch_has_no_cuda_stops_with_one_line_counting_no_failure(ray_cluster, pg_url, study_toml):
    """The cluster's nodes declare a GPU each, but this machine's torch is a CPU build: each trial's worker refuses
    before building a model, the driver stops the study with one line naming gpus_per_trial and the node, and every
    trial it started is queued again rather than counted against max_failed_trials."""
    if torch.cuda.is_available():
        pytest.skip("needs a torch that cannot use CUDA")
    toml = study_toml(("workers = 2", "workers = 2\ngpus_per_trial = 0.5"))
    done = _cli("run", str(toml), "--address", ray_cluster, "--storage", pg_url, env=RAY_ENV, timeout=240)
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stdout + done.stderr
    error = lines[0]
    assert f"cannot train on cuda as resources.gpus_per_trial = 0.5 asks: its torch {torch.__version__} is built without CUDA" in error
    assert "error: node " in error and "the study stopped, no trial counted as failed" in error and "prism-search resume tiny" in error
    assert "Traceback" not in done.stdout + done.stderr
    trials = optuna.load_study(study_name="tiny", storage=pg_url).get_trials()
    failed = [t for t in trials if t.state == TrialState.FAIL]
    assert failed and all("queued again" in t.user_attrs["error"] for t in failed)
    assert not [t for t in trials if t.state == TrialState.RUNNING]
    assert {t.user_attrs["schedule"] for t in failed} <= {t.user_attrs["schedule"] for t in trials if t.state == TrialState.WAITING}


@pytest.mark.e2e
def test_a_head_that_refuses_this_driver_is_one_line(tmp_path):
    """A head with token authentication, joined with another token: Ray retries, then the run ends in one line."""
    temp_dir = tempfile.mkdtemp(prefix="ra5", dir="/tmp")
    port, ray_bin = _free_port(), str(Path(sys.executable).parent / "ray")
    head_env = RAY_ENV | {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": "a" * 40}
    try:
        subprocess.run(
            [ray_bin, "start", "--head", "--port", str(port), "--num-cpus", "1", "--include-dashboard", "false", "--temp-dir", temp_dir],
            env=head_env,
            check=True,
            capture_output=True,
            timeout=180,
        )
        from tests.search.pg import fresh_database

        with fresh_database() as url:
            # Ray retries a refused driver once a second, 20 times by default: 2 tries reach the same refusal
            env = RAY_ENV | {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": "b" * 40, "RAY_NUM_REDIS_GET_RETRIES": "2"}
            done = _cli("run", "studies/tiny.toml", "--address", f"127.0.0.1:{port}", "--storage", url, env=env, timeout=240)
    finally:
        _stop_cluster(temp_dir)
    assert done.returncode == 2, done.stdout + done.stderr
    # Ray's C++ client logs its retries on stderr itself; the run's own words are one line, and no traceback
    error = done.stderr.strip().splitlines()[-1]
    assert error.startswith(f"error: --address 127.0.0.1:{port}: the Ray head answers but did not let this driver join")
    assert "RAY_AUTH_TOKEN" in error and "Traceback" not in done.stdout + done.stderr


# -- the team workflow: Ray Jobs on a head with its dashboard -----------------------------------------------
@pytest.fixture
def ray_jobs_head():
    """A one-node head with the dashboard that serves the Job API; yields its http address. Every port is a free
    one: another Ray on this machine may hold the defaults (6379 is Redis's; 52365 the job agent's)."""
    temp_dir = tempfile.mkdtemp(prefix="rj5", dir="/tmp")
    port, dashboard, agent = _free_port(), _free_port(), _free_port()
    # job shells find prism-search; `ray job stop` waits as long as the shipped head image lets it (Ray's 3 s is not
    # enough for a driver on a loaded machine to queue its trials again)
    stop_wait = re.search(r"RAY_JOB_STOP_WAIT_TIME_S=(\d+)", (ROOT / "docker" / "Dockerfile.cpu").read_text())[1]
    env = {**RAY_ENV, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}", "RAY_JOB_STOP_WAIT_TIME_S": stop_wait}
    try:
        subprocess.run(
            [
                str(Path(sys.executable).parent / "ray"),
                "start",
                "--head",
                "--port",
                str(port),
                "--dashboard-port",
                str(dashboard),
                "--dashboard-agent-listen-port",
                str(agent),
                "--include-dashboard=true",
                "--num-cpus",
                "2",
                "--temp-dir",
                temp_dir,
                "--disable-usage-stats",
            ],
            env=env,
            check=True,
            capture_output=True,
            timeout=180,
        )
        yield f"http://127.0.0.1:{dashboard}"
    finally:
        _stop_cluster(temp_dir)


def _submit(client, entrypoint: str) -> str:
    """Submit once the head's job agent has registered (it comes up a few seconds after `ray start` returns)."""
    deadline = time.monotonic() + 60
    while True:
        try:
            return client.submit_job(entrypoint=entrypoint)
        except RuntimeError as e:
            if "No available agent" not in str(e) or time.monotonic() > deadline:
                raise
            time.sleep(1.0)


def _job_ends(client, job_id: str, timeout: float = 120):
    from ray.job_submission import JobStatus

    deadline = time.monotonic() + timeout
    while (status := client.get_job_status(job_id)) not in (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.STOPPED):
        assert time.monotonic() < deadline, client.get_job_logs(job_id)
        time.sleep(0.5)
    return status, client.get_job_logs(job_id)


@pytest.mark.long
@pytest.mark.e2e
def test_ray_job_submit_stop_and_resume(ray_jobs_head, pg_url, study_toml):
    from ray.job_submission import JobStatus, JobSubmissionClient

    client = JobSubmissionClient(ray_jobs_head)
    toml = study_toml(("n_trials = 5", "n_trials = 4"))
    job = _submit(client, f"prism-search run {toml} --address auto --storage {pg_url}")
    deadline = time.monotonic() + 90
    while not re.search(r"trial \d+ (?:\([^)]*\) )?(COMPLETE|PRUNED)", logs := client.get_job_logs(job)):  # the live progress
        assert time.monotonic() < deadline and client.get_job_status(job) in (JobStatus.PENDING, JobStatus.RUNNING), logs
        time.sleep(0.5)
    client.stop_job(job)  # SIGTERM to the driver, like `ray job stop`
    status, logs = _job_ends(client, job)
    assert status == JobStatus.STOPPED, logs
    assert f"prism-search resume tiny --storage {pg_url}" in logs, logs
    assert "\x1b" not in logs and "SIGTERM received" not in logs, logs  # plain lines, no crash banner
    study = optuna.load_study(study_name="tiny", storage=pg_url)
    assert not study.get_trials(states=(TrialState.RUNNING,))
    interrupted = [t for t in study.trials if t.state == TrialState.FAIL]
    assert interrupted and all("interrupted" in t.user_attrs["error"] for t in interrupted)
    waiting = [t.user_attrs["schedule"] for t in study.get_trials(states=(TrialState.WAITING,))]
    # queued again: every interrupted trial that had its schedule (one stopped before the sampler drew it has none),
    # but a served copy, whose original (queued again too, or finished) has its schedule
    assert sorted(waiting) == sorted(
        t.user_attrs["schedule"] for t in interrupted if "schedule" in t.user_attrs and "duplicate_of" not in t.user_attrs
    )

    job = _submit(client, f"prism-search resume tiny --address auto --storage {pg_url}")
    status, logs = _job_ends(client, job)
    assert status == JobStatus.SUCCEEDED and "gap to uniform" in logs and "\x1b" not in logs, logs
    assert len(_finished_and_workers(pg_url)[0]) == 4
