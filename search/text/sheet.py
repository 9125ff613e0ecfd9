"""A table's words, drawn by whichever display prints it (the CLI with rich): its title, column names, rows and the
notes printed under it."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Sheet:
    """`columns` empty: a sheet of (label, value) rows, drawn without a header."""

    title: str
    rows: list[tuple[str, ...]] = field(default_factory=list)
    columns: tuple[str, ...] = ()
    notes: list[str] = field(default_factory=list)  # lines under the table: what its columns mean

    def add(self, *cells: str) -> None:
        self.rows.append(cells)
