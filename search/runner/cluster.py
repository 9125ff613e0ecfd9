"""Ray: the cluster-mode checks made before any compute or database write, and the connection a run makes.

`--address` sends trials to a Ray cluster that may span several machines. Such a study must live in a
network database: a SQLite file exists on one machine only, so a second driver, a `resume` after the
driver's machine is gone, or a dashboard on another node could never see it.
"""

from __future__ import annotations

import logging
import re
import socket

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


def connect_ray(address: str | None, num_cpus: int) -> str | None:
    """Join a running cluster at `address` (returns its dashboard address), or start a local Ray sized for this
    run's workers."""
    import ray

    if ray.is_initialized():
        return None
    with interrupts_held():  # a Ctrl-C during start-up stops the run once Ray is up, never half-way through
        if address:
            # quiet: Ray's INFO banner carries terminal colour codes even into a log file (`ray job logs`)
            return ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING).dashboard_url or None
        # a private local cluster: its token-auth notice and dashboard are noise to a CLI user
        ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
        return None


def unfit_trial_note(cpus: int, gpus: float) -> str | None:
    """A joined cluster where no live node could hold one trial now: a note, not an error, since an autoscaler may
    add such a node (Ray waits for one), but on a fixed cluster the run would otherwise wait without a word."""
    import ray

    nodes: list[dict[str, float]] = [node["Resources"] for node in ray.nodes() if node["Alive"]]
    if any(r.get("CPU", 0) >= cpus and r.get("GPU", 0) >= gpus for r in nodes):
        return None
    largest: dict[str, float] = max(nodes, key=lambda r: (r.get("CPU", 0), r.get("GPU", 0)), default={})
    asked = f"{cpus} CPUs" + (f" and {gpus:g} GPUs" if gpus else "")
    return (
        f"note: no node of this cluster has {asked} for one trial now (the largest: {largest.get('CPU', 0):g} CPUs, "
        f"{largest.get('GPU', 0):g} GPUs); trials wait until such a node joins. On a fixed cluster, lower "
        "resources.cpus_per_trial or gpus_per_trial (`ray status` lists the nodes)"
    )
