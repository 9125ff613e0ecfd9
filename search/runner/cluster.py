"""Cluster-mode checks, made by the CLI before any compute or database write.

`--address` sends trials to a Ray cluster that may span several machines. Such a study must live in a
network database: a SQLite file exists on one machine only, so a second driver, a `resume` after the
driver's machine is gone, or a dashboard on another node could never see it.
"""

from __future__ import annotations

import re
import socket

from search.errors import ClusterError

_ADDRESS = re.compile(r"^(?P<host>[A-Za-z0-9_.\-]+):(?P<port>\d{1,5})$")
PROBE_TIMEOUT_S = 5.0  # a head on another continent answers a TCP connect well within this


def check_cluster(address: str | None, storage: str) -> None:
    """Refuse a malformed `--address`, one where no head answers, or a cluster run whose study would be a SQLite file.

    Only HOST:PORT of a head's GCS: `auto` (whatever cluster this machine last started) and `ray://` (Ray Client,
    which the driver does not use) would otherwise fail as tracebacks, and an address nobody answers at made Ray
    retry for minutes after the study was written."""
    if address is None:
        return
    match = _ADDRESS.match(address)
    if not match or not 0 < int(match["port"]) < 65536:
        raise ClusterError(
            f"--address {address!r} is not HOST:PORT (auto and ray:// are not supported); pass the head's address, "
            "e.g. --address 10.0.0.5:6380"
        )
    if storage.startswith("sqlite"):
        raise ClusterError(
            f"--address {address} runs trials on a Ray cluster, but storage {storage!r} is a SQLite file on this "
            "machine only; pass a network database every node can reach, e.g. --storage postgresql+psycopg://USER@HOST:5432/DB"
        )
    try:
        socket.create_connection((match["host"], int(match["port"])), timeout=PROBE_TIMEOUT_S).close()
    except OSError as e:
        raise ClusterError(
            f"--address {address}: no Ray head answers there ({e.strerror or e}); start one with "
            f"`ray start --head --port {match['port']}` on that machine, or pass its address"
        ) from None
