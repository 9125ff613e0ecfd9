"""Cluster-mode checks, made by the CLI before any compute or database write.

`--address` sends trials to a Ray cluster that may span several machines. Such a study must live in a
network database: a SQLite file exists on one machine only, so a second driver, a `resume` after the
driver's machine is gone, or a dashboard on another node could never see it.
"""

from __future__ import annotations

import re

from search.errors import ClusterError

_ADDRESS = re.compile(r"^(ray://)?[A-Za-z0-9_.\-]+:\d{1,5}$")


def check_cluster(address: str | None, storage: str) -> None:
    """Refuse a malformed `--address`, or a cluster run whose study would be a SQLite file."""
    if address is None:
        return
    if address != "auto" and not _ADDRESS.match(address):
        raise ClusterError(f"--address {address!r} is not HOST:PORT; pass the head's address, e.g. --address 10.0.0.5:6380")
    if storage.startswith("sqlite"):
        raise ClusterError(
            f"--address {address} runs trials on a Ray cluster, but storage {storage!r} is a SQLite file on this "
            "machine only; pass a network database every node can reach, e.g. --storage postgresql+psycopg://USER@HOST:5432/DB"
        )
