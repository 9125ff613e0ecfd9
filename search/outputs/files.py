"""Every file a command writes for the user (report, audit profile and page, prior) goes through `write_output`.

A write goes to a temporary file beside the target, then replaces it in one rename: a full disk, a read-only place
or an interrupt leaves the old file whole. `check_output` runs before any compute, and refuses to replace what is
not such an output: a database (a study's own, also through a symlink), a config, a folder or a device.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from search.errors import OutputError

SQLITE_HEADER = b"SQLite format 3\x00"


def check_output(path: str | Path, flag: str, suffix: str) -> Path:
    """The file `path` (a symlink resolved) that `write_output` may write or replace with a `suffix` file."""
    target = Path(path)
    shown = f"{flag} {str(path)!r}"
    if target.is_dir():
        raise OutputError(f"{shown} is a folder (fix: name a file, e.g. {str(target / ('output' + suffix))!r})")
    real = target.resolve()
    if real.exists():
        if not real.is_file():
            raise OutputError(f"{shown} is a device, pipe or socket, not a file (fix: name a file)")
        with open(real, "rb") as f:
            if f.read(len(SQLITE_HEADER)) == SQLITE_HEADER:
                raise OutputError(f"{shown} is a database; refusing to write over it (fix: name another file)")
        if real.suffix.lower() != suffix:
            raise OutputError(f"{shown} exists and is not a {suffix} file; refusing to replace it (fix: name a new file or a {suffix} one)")
    if not real.parent.is_dir():
        raise OutputError(f"{shown}: folder {str(real.parent)!r} does not exist (fix: create it first)")
    if not os.access(real.parent, os.W_OK | os.X_OK):
        raise OutputError(f"{shown}: folder {str(real.parent)!r} is not writable (fix: name a file in a writable folder)")
    return real


def write_output(path: str | Path, data: str | bytes, flag: str, suffix: str) -> Path:
    """Write `data` to `path` atomically (see the module docstring); returns the path as given."""
    real = check_output(path, flag, suffix)
    raw = data.encode() if isinstance(data, str) else data
    mode = real.stat().st_mode & 0o777 if real.exists() else 0o666 & ~_umask()
    try:
        fd, temp = tempfile.mkstemp(dir=real.parent, prefix=f".{real.name}.", suffix=".tmp")
    except OSError as e:
        where = str(real.parent)
        raise OutputError(f"{flag} {str(path)!r}: cannot write in {where!r} ({e.strerror}) (fix: name a writable place)") from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(temp, mode)
        os.replace(temp, real)
    except OSError as e:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        kept = " (the existing file is unchanged)" if real.exists() else ""
        raise OutputError(f"{flag} {str(path)!r}: cannot write ({e.strerror}){kept} (fix: free space, or name another place)") from None
    return Path(path)


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current
