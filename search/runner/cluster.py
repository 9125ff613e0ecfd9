"""Ray: the cluster-mode checks made before any compute or database write, and the connection a run makes.

`--address` sends trials to a Ray cluster that may span several machines. Such a study must live in a
network database: a SQLite file exists on one machine only, so a second driver, a `resume` after the
driver's machine is gone, or a dashboard on another node could never see it.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from search.errors import ClusterError
from search.signals import interrupts_held

_ADDRESS = re.compile(r"^(ray://)?(?P<host>[A-Za-z0-9_.\-]+):(?P<port>\d{1,5})$")
PROBE_TIMEOUT_S = 5.0  # a head on another continent answers a TCP connect well within this


def check_cluster(address: str | None, storage: str) -> None:
    """Refuse a malformed `--address`, one where no head answers, or a cluster run whose study would be a SQLite file.

    HOST:PORT (or ray://HOST:PORT), or `auto`: the cluster this machine runs (a `ray job submit` driver). Where no
    head answers, Ray would fail as a traceback, or retry for minutes after the study was written."""
    if address is None:
        return
    match = _ADDRESS.match(address)
    if address != "auto" and (not match or not 0 < int(match["port"]) < 65536):
        raise ClusterError(
            f"--address {address!r} is not HOST:PORT; pass the head's address, e.g. --address 10.0.0.5:6380 (or auto on a cluster node)"
        )
    if storage.startswith("sqlite"):
        raise ClusterError(
            f"--address {address} runs trials on a Ray cluster, but storage {storage!r} is a SQLite file on this "
            "machine only; pass a network database every node can reach, e.g. --storage postgresql+psycopg://USER@HOST:5432/DB"
        )
    host, port = (match["host"], match["port"]) if match else _running_cluster()
    try:
        socket.create_connection((host, int(port)), timeout=PROBE_TIMEOUT_S).close()
    except OSError as e:
        raise ClusterError(
            f"--address {address}: no Ray head answers at {host}:{port} ({e.strerror or e}); start one with "
            f"`ray start --head --port {port}` on that machine, or pass its address"
        ) from None


def _running_cluster() -> tuple[str, str]:
    """HOST, PORT of the cluster `auto` means: $RAY_ADDRESS, else the one this machine started (Ray's own lookup)."""
    from ray._private.services import canonicalize_bootstrap_address  # the lookup ray.init(address="auto") makes

    try:
        found = canonicalize_bootstrap_address("auto")
    except (ConnectionError, ValueError):
        found = None
    if not found:
        raise ClusterError(
            "--address auto: no running Ray cluster on this machine (fix: `ray start --head --port PORT`, or pass HOST:PORT)"
        )
    host, _, port = found.rpartition(":")
    return host, port


@contextmanager
def ray_owned() -> Iterator[None]:
    """A command that starts Ray (or joins a cluster) leaves it when it ends. In a notebook, the next study's run
    would otherwise meet the first one's local Ray: `connect_ray` keeps a Ray it finds, so the new run's `address`
    and worker count would be ignored. A Ray the caller started before the command is theirs and stays."""
    ray = sys.modules.get("ray")  # no import: a command that trains nothing never loads Ray
    ours = ray is None or not ray.is_initialized()
    try:
        yield
    finally:
        ray = sys.modules.get("ray")
        if ours and ray is not None and ray.is_initialized():
            ray.shutdown()


def connect_ray(address: str | None, num_cpus: int) -> str | None:
    """Join a running cluster at `address` (returns its dashboard address), or start a local Ray sized for this
    run's workers."""
    import ray

    if ray.is_initialized():
        return None
    with interrupts_held():  # a Ctrl-C during start-up stops the run once Ray is up, never half-way through
        if address:
            try:
                # quiet: Ray's INFO banner carries terminal colour codes even into a log file (`ray job logs`)
                return ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING).dashboard_url or None
            except (ConnectionError, RuntimeError, ray.exceptions.RayError) as e:  # a head that answers TCP but refuses this driver
                raise ClusterError(_refused(address, e)) from None
        # a private local cluster: its token-auth notice and dashboard are noise to a CLI user
        ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
        return None


def _refused(address: str, e: Exception) -> str:
    """One line for a head that answers but will not let this driver join: most often token authentication
    (Ray's own reason then goes only to its log, as `InvalidAuthToken`)."""
    reason = next((line.strip() for line in str(e).splitlines() if line.strip()), type(e).__name__).split(". ")[0]
    return (
        f"--address {address}: the Ray head answers but did not let this driver join ({reason}); if the cluster uses "
        "token authentication, run with RAY_AUTH_MODE=token and RAY_AUTH_TOKEN set to its token (fix: the cluster's "
        "token, or the address of a head that accepts this machine)"
    )


UNFIT_WAIT_DEFAULT_S = 300  # an autoscaler adds a node within minutes; a fixed cluster never does


def _no_fitting_node(cpus: int, gpus: float) -> str | None:
    """What no live node of the joined cluster has for one trial now (None: one has it)."""
    import ray

    nodes: list[dict[str, float]] = [node["Resources"] for node in ray.nodes() if node["Alive"]]
    if any(r.get("CPU", 0) >= cpus and r.get("GPU", 0) >= gpus for r in nodes):
        return None
    largest: dict[str, float] = max(nodes, key=lambda r: (r.get("CPU", 0), r.get("GPU", 0)), default={})
    asked = f"{cpus} CPUs" + (f" and {gpus:g} GPUs" if gpus else "")
    biggest = f"{largest.get('CPU', 0):g} CPUs, {largest.get('GPU', 0):g} GPUs"
    return f"no node of this cluster has {asked} for one trial now (the largest: {biggest})"


def unfit_trial_note(cpus: int, gpus: float) -> str | None:
    """A joined cluster where no live node could hold one trial now: a note, not an error yet, since an autoscaler
    may add such a node (Ray waits for one); `wait_for_a_fitting_node` bounds the wait."""
    missing = _no_fitting_node(cpus, gpus)
    if missing is None:
        return None
    return (
        f"note: {missing}; waiting up to {unfit_wait_seconds()} s for such a node to join. On a fixed cluster, lower "
        "resources.cpus_per_trial or gpus_per_trial (`ray status` lists the nodes)"
    )


def unfit_wait_seconds() -> int:
    """How long a run waits for a node that can hold one trial: $PRISM_SEARCH_UNFIT_WAIT_S, whole seconds >= 1."""
    text = os.environ.get("PRISM_SEARCH_UNFIT_WAIT_S", str(UNFIT_WAIT_DEFAULT_S)).strip()
    if not text.isascii() or not text.isdigit() or int(text) < 1:
        raise ClusterError(f"PRISM_SEARCH_UNFIT_WAIT_S={text!r} is not a whole number of seconds >= 1; fix: unset it or set e.g. 300")
    return int(text)


def wait_for_a_fitting_node(cpus: int, gpus: float, say: Callable[[str], None], poll_s: float = 2.0) -> None:
    """Return once a live node of the joined cluster can hold one trial. Where none can, say so at once (`say`), wait
    a bounded time for one to join, then stop with one line: on a fixed cluster the run would wait forever."""
    if (note := unfit_trial_note(cpus, gpus)) is None:
        return
    say(note)
    limit = unfit_wait_seconds()
    deadline = time.monotonic() + limit
    while (missing := _no_fitting_node(cpus, gpus)) is not None:
        if time.monotonic() >= deadline:
            raise ClusterError(
                f"{missing.replace(' now ', ' ')}, still after {limit} s; fix: lower resources.cpus_per_trial or gpus_per_trial, "
                "or add such a node (`ray status` lists them), then resume the study (PRISM_SEARCH_UNFIT_WAIT_S sets the wait)"
            )
        time.sleep(poll_s)
