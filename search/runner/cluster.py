"""Cluster-mode checks, made by the CLI before any compute or database write.

`--address` sends trials to a Ray cluster that may span several machines. Such a study must live in a
network database: a SQLite file exists on one machine only, so a second driver, a `resume` after the
driver's machine is gone, or a dashboard on another node could never see it.
"""

from __future__ import annotations

import re
import socket

from search.errors import ClusterError

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
