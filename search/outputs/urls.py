"""URLs as they may be shown or stored: credentials masked. Imports nothing of the project: storage, trackers and
every display use it alike.

One parser for every URL, SQLAlchemy's (RFC 1738, the one that connects to the database): it takes any
`scheme://` URL, a tracker's `http://user:pw@host` included, and a password holding `#`, `?`, a space, a quote or
a tab stays one field (`urllib` ends a password at `#` or `?`, and a regex at whatever it was not written for).
`urllib` only splits what SQLAlchemy refuses (a port that is not a number), so that too prints masked.
"""

from __future__ import annotations

import re
from string import ascii_letters
from urllib.parse import parse_qsl, quote, quote_plus, urlsplit

import sqlalchemy
from sqlalchemy.engine import URL

MASK = "***"
_SECRET_KEYS = ("pass", "pwd", "secret", "token")  # query parameters that hold a credential: ?password=, ?sslpassword=


def parse_url(url: str) -> URL | None:
    """`url` parsed, or None for what is not a `scheme://` URL (a tracker's folder). A raw `@` in a password, as
    users type it, ends the password at the last `@` before the host."""
    try:
        parsed = sqlalchemy.engine.make_url(url)
    except (sqlalchemy.exc.ArgumentError, ValueError):
        return None
    if parsed.host and "@" in parsed.host and parsed.password is not None:
        rest, _, host = parsed.host.rpartition("@")
        parsed = parsed.set(password=f"{parsed.password}@{rest}", host=host)
    return parsed


def _secrets(url: str) -> list[tuple[str, str]]:
    """(text before, secret) pairs of `url`: `:` before a password, `KEY=` before a credential in the query. A URL
    SQLAlchemy refuses (a port that is not a number) is still masked, as `urllib` splits it."""
    parsed = parse_url(url)
    query: list[tuple[str, str]]
    if parsed is not None:
        password = parsed.password
        query = [(k, v) for k, values in parsed.query.items() for v in ([values] if isinstance(values, str) else values)]
    elif "://" in url:
        split = urlsplit(url)
        password, query = split.password, parse_qsl(split.query)
    else:
        return []
    pairs = [(":", password)] if password else []
    pairs += [(f"{key}=", value) for key, value in query if any(word in key.lower() for word in _SECRET_KEYS)]
    return [(before, v) for before, v in pairs if v and v != MASK]


def _forms(secret: str) -> set[str]:
    """A secret as typed, percent-encoded or form-encoded: the URL may hold any, and a client may quote any."""
    return {secret, quote(secret, safe=""), quote_plus(secret), quote(secret)}


def mask_url(url: str) -> str:
    """Hide the credentials of a URL (`user:pw@`, `:pw@`, `?password=`) wherever it is printed, logged or stored: a
    study keeps its config, and anyone who can read the study could read them. The parser finds them; the rest of
    the URL is kept exactly as written."""
    for before, secret in _secrets(url):
        for form in sorted(_forms(secret), key=len, reverse=True):
            url = url.replace(f"{before}{form}", f"{before}{MASK}")
    return url


_SCHEME_CHAR = re.compile(r"[\w+.-]")
_URL_BODY = re.compile(r"[^\s'\"<>]+")


def _mask_urls(text: str) -> str:
    r"""Each `scheme://...` written in `text` through mask_url: what the regex `[A-Za-z][\w+.-]*://[^\s'"<>]+` finds,
    leftmost first, but found from each `://` outwards, in time linear in the text (that regex retries every start
    inside a long word: seconds on a 40,000-character value)."""
    out, done, at = [], 0, text.find("://")
    while at != -1:
        start = at
        while start > done and _SCHEME_CHAR.match(text, start - 1):
            start -= 1
        while start < at and text[start] not in ascii_letters:  # a scheme starts with a letter
            start += 1
        body = _URL_BODY.match(text, at + 3)
        if start == at or body is None:
            at = text.find("://", at + 1)
            continue
        out += [text[done:start], mask_url(text[start : body.end()])]
        done = body.end()
        at = text.find("://", done)
    return "".join(out) + text[done:]


def mask_in(text: str, url: str | None = None) -> str:
    """`text` (an error message, a traceback) with the credentials of `url` masked in every form a client may
    quote them, and those of any other URL written in it."""
    for _, secret in _secrets(url) if url else []:
        for form in _forms(secret):
            text = text.replace(form, MASK)
    return _mask_urls(text)


def lost_credentials(url: str) -> bool:
    """Whether `url` is a masked one, as a stored config keeps it: using it would log in with `***`."""
    parsed = parse_url(url)
    return parsed is not None and (parsed.password == MASK or MASK in parsed.query.values())
