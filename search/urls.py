"""URLs as they may be shown or stored: credentials masked. Imports nothing of the project: storage, trackers and
every display use it alike."""

from __future__ import annotations

import re

MASK = "***"

# the password of `user:pw@` or `:pw@`: up to the last `@` before the path, or, for one holding a raw `/`,
# up to the first `@` (where SQLAlchemy ends it)
# not anchored: URLs are masked inside messages and tracebacks too; a URL ends at whitespace or a quote
_URL_PASSWORD = re.compile(r"([A-Za-z][\w+.-]*://[^:/?#@\s'\"]*):(?:[^/?#\s'\"]*|[^@?#\s'\"]*)@")
_QUERY_SECRET = re.compile(r"([?&;][^=&#;]*(?:pass|pwd|secret|token)[^=&#;]*=)[^&#;]*", re.IGNORECASE)


def mask_url(url: str) -> str:
    """Hide the credentials of a URL (`user:pw@`, `:pw@`, `?password=`, percent-encoded or not) wherever it is
    printed, logged or stored: a study keeps its config, and anyone who can read the study could read them."""
    return _QUERY_SECRET.sub(rf"\1{MASK}", _URL_PASSWORD.sub(rf"\1:{MASK}@", url))


def lost_credentials(url: str) -> bool:
    """Whether `url` is a masked one, as a stored config keeps it: using it would log in with `***`."""
    return MASK in url and mask_url(url) == url
