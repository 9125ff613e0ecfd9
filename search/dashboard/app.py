"""The dashboard web app: a plain WSGI callable served by waitress (no build step), read-only by construction.

It only ever calls Optuna's read API (`get_all_studies`, `get_trials`), answers nothing but GET, and keeps one
Optuna `_CachedStorage` for its whole life, so finished trials are read from the database once and each refresh
of a running study only reads the trials that are still unfinished. An unreachable database is a page (503)
that recovers by itself once the database is back; unknown studies and trials are 404 pages.
"""

from __future__ import annotations

import base64
import contextlib
import gzip
import hashlib
import json
import logging
import re
import resource
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from urllib.parse import parse_qs, quote, unquote, urlsplit

import optuna
import sqlalchemy
import waitress.adjustments
import waitress.channel
import waitress.server
import waitress.task
from waitress import wasyncore

from search.dashboard import pages
from search.dashboard.views import StudyView, study_view
from search.errors import PrismSearchError, StorageError, StorageUnreachable, StudyUnreadable
from search.outputs.urls import mask_in, mask_url
from search.signals import raise_if_interrupted, sigterm_as_ctrl_c
from search.storage import cached, change_stamp, dispose, no_cycle_collection, open_storage, unreadable_studies

log = logging.getLogger("prism_search.dashboard")
LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")


class DashboardError(PrismSearchError):
    pass


class _NotFound(Exception):
    pass


@dataclass
class _Shared:
    """One read that requests arriving while it runs wait for and share: its value, or what it raised."""

    done: threading.Event = field(default_factory=threading.Event)
    value: str = ""
    error: Exception | None = None


def open_readonly(url: str) -> optuna.storages.BaseStorage:
    """The project's storage factory in its reading mode (creates nothing), behind Optuna's trial cache."""
    return cached(open_storage(url, create=False))


class Dashboard:
    """WSGI app: `/`, `/study/NAME`, `/study/NAME/trial/N`, `/api/stamp[?study=NAME]`, `/static/plotly.min.js`.

    A study's view and pages are computed once per change stamp (`stamp`: counts read in the database, not its
    trials) and shared: every open page polls `/api/stamp` every few seconds, and many requests for one study at
    once wait for one computation instead of each repeating it."""

    def __init__(self, storage_url: str):
        self.url = storage_url
        self.masked = mask_url(storage_url)
        self._storage: optuna.storages.BaseStorage | None = None
        self._lock = threading.Lock()
        self._rows: dict = {}  # finished trials' rows, see study_view
        self._study_locks: dict[str, threading.Lock] = {}
        self._views: dict[str, StudyView] = {}  # each study's latest view, valid while its stamp stands
        self._pages: dict[str, dict[tuple, Html]] = {}  # each study's rendered pages for that view
        self._stamp_reads: dict[str, _Shared] = {}  # each study's stamp read under way, see stamp

    # -- data --------------------------------------------------------------------------------------------
    def storage(self) -> optuna.storages.BaseStorage:
        with self._lock:  # open lazily and retry on every request until the database answers
            if self._storage is None:
                self._storage = open_readonly(self.url)
            return self._storage

    def close(self) -> None:
        """Close the database connections: the last one to close a SQLite file in WAL mode folds the log back into
        it and removes its -wal and -shm files."""
        with self._lock:
            if self._storage is not None:
                dispose(self._storage)
                self._storage = None
            self._rows.clear()
            self._views.clear()
            self._pages.clear()

    def study_names(self) -> list[str]:
        return [s.study_name for s in self.storage().get_all_studies()]

    def stamp(self, name: str) -> str:
        """The study's change stamp, read as counts in the database. Requests that arrive while a read of it is
        under way take that read's answer: a read counts every attr row (tens of milliseconds at 5,000 trials),
        and 20 requests at once would otherwise queue 20 reads. Such a request may get the stamp from just before
        a change, as if it had come a read earlier; its page's poll finds the change."""
        with self._lock:
            shared = self._stamp_reads.get(name)
            reading = shared is None
            if shared is None:
                shared = self._stamp_reads[name] = _Shared()
        if reading:
            try:
                shared.value = change_stamp(self.storage(), name)
            except KeyError:
                shared.error = _NotFound(f"no study named {name!r} in {self.masked}")
            except Exception as e:
                shared.error = e
            finally:
                with self._lock:
                    del self._stamp_reads[name]
                shared.done.set()
        shared.done.wait()
        if shared.error is not None:
            raise shared.error
        return shared.value

    def _study_lock(self, name: str) -> threading.Lock:
        with self._lock:
            return self._study_locks.setdefault(name, threading.Lock())

    def view(self, name: str) -> StudyView:
        stamp = self.stamp(name)  # before the trials: a change in between only costs one more reload
        with self._study_lock(name):
            view = self._views.get(name)
            if view is None or view.stamp != stamp:
                try:
                    study = optuna.load_study(study_name=name, storage=self.storage())
                except KeyError:
                    raise _NotFound(f"no study named {name!r} in {self.masked}") from None
                with no_cycle_collection():
                    view = self._views[name] = study_view(study, self._rows, stamp)
                self._pages[name] = {}
            return view

    def page(self, name: str, key: tuple, render: Callable[[StudyView], str]) -> Html:
        """Page `key` of study `name`, rendered, encoded and hashed for its policy once per change of the study."""
        view = self.view(name)
        with self._study_lock(name):
            pages = self._pages.setdefault(name, {})
            if self._views.get(name) is not view:  # the study moved while this request waited: render what it got
                return Html.of(render(view))
            if key not in pages:
                with no_cycle_collection():
                    pages[key] = Html.of(render(view))
            return pages[key]

    def warm_up(self) -> None:
        """Read every study once (at start, in the background) so the first page view is not the slow one."""
        try:
            for name in self.study_names():
                with contextlib.suppress(StudyUnreadable):  # its page says so; the other studies warm up
                    self.page(name, ("study", "/"), lambda view: pages.study_page(view, self.masked, "/"))
        except Exception as e:  # the first request will show the same problem as a page
            log.warning("warm-up of %s failed: %s", self.masked, mask_in(str(e).splitlines()[0] if str(e) else repr(e), self.url))

    # -- WSGI --------------------------------------------------------------------------------------------
    def __call__(self, environ: dict, start_response: Callable) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "/")
        root = environ.get("SCRIPT_NAME", "").rstrip("/") + "/"
        if environ.get("REQUEST_METHOD", "GET") not in ("GET", "HEAD"):
            return read_only(self)(environ, start_response)
        try:
            status, body, kind = self._route(_segments(environ), parse_qs(environ.get("QUERY_STRING", "")), root)
        except _NotFound as e:
            hint = f'<a href="{root}">all studies</a>'
            status, body, kind = "404 Not Found", pages.error_page("404", "Not found", str(e), self.masked, hint, root), "text/html"
        except StudyUnreadable as e:  # one study's content: the rest of the storage serves on
            hint = f'The other studies read as usual: <a href="{root}">all studies</a>.'
            status, body, kind = "200 OK", pages.error_page("200", "Study unreadable", str(e), self.masked, hint, root), "text/html"
        except (StorageError, sqlalchemy.exc.SQLAlchemyError) as e:  # down, empty, damaged: may be fixed while we serve
            message = mask_in(str(e).splitlines()[0], self.url) if str(e) else type(e).__name__
            log.warning("storage %s: %s", self.masked, message)
            self.close()  # the next request opens it afresh: a file put back in place is read, not the damaged one
            down = isinstance(e, (StorageUnreachable, sqlalchemy.exc.OperationalError))
            status = "503 Service Unavailable"
            body = pages.error_page(
                "503",
                "Database unreachable" if down else "No readable studies",
                message,
                self.masked,
                "Start the database or fix <code>--storage</code>, then reload this page.",
                root,
            )
            kind = "text/html"
        except Exception:  # a bug: log it for the operator, show a page without internals to the browser
            log.error("dashboard error on %s\n%s", path, mask_in(traceback.format_exc().rstrip(), self.url))
            status, kind = "500 Internal Server Error", "text/html"
            body = pages.error_page("500", "Internal error", "the dashboard failed on this page; see the server log", self.masked, "", root)
        gzipped = accepts_gzip(environ.get("HTTP_ACCEPT_ENCODING", ""))
        return self._send(start_response, status, body, kind, head=environ.get("REQUEST_METHOD") == "HEAD", gzipped=gzipped)

    def _route(self, parts: list[str], query: dict, root: str) -> tuple[str, str | bytes | Html, str]:
        ok = "200 OK"
        if not parts:
            names = self.study_names()
            stamp = "-".join(self.stamp(n) for n in names) or "empty"  # what /api/stamp answers for them
            views, unreadable = [], {u.study: u.text() for u in unreadable_studies(self.storage())}
            for name in names:
                try:
                    views.append(self.view(name))
                except StudyUnreadable as e:  # one damaged study is a row saying so, never the whole index
                    unreadable[name] = str(e)
            return ok, pages.studies_page(views, self.masked, root, unreadable, stamp), "text/html"
        if parts == ["static", "plotly.min.js"]:
            return ok, pages.plotly_js(), "application/javascript"
        if parts == ["api", "stamp"]:
            names = list(dict.fromkeys(query.get("study") or self.study_names()))  # each study read once, however often named
            stamp = "-".join(self.stamp(n) for n in names) or "empty"
            return ok, json.dumps({"stamp": stamp}), "application/json"
        if parts[0] == "study" and len(parts) == 2:
            return ok, self.page(parts[1], ("study", root), lambda view: pages.study_page(view, self.masked, root)), "text/html"
        if parts[0] == "study" and len(parts) == 4 and parts[2] == "trial":
            view = self.view(parts[1])
            row = view.row(int(parts[3])) if _TRIAL_NUMBER.fullmatch(parts[3]) else None
            if row is None:
                raise _NotFound(f"study {view.name!r} has no trial {parts[3]!r} (trials 0–{len(view.rows) - 1})")
            page = self.page(view.name, ("trial", row.number, root), lambda view: pages.trial_page(view, row, self.masked, root))
            return ok, page, "text/html"
        raise _NotFound(f"no page at {'/' + '/'.join(parts)!r}")

    @staticmethod
    def _send(start_response, status: str, body: str | bytes | Html, kind: str, head: bool = False, gzipped: bool = False) -> list[bytes]:
        """`gzipped`: the client takes gzip; a page is then sent gzipped."""
        if kind == "text/html" and isinstance(body, str):
            body = Html.of(body)
        if isinstance(body, Html):
            data = body.gzipped if gzipped else body.data
        else:
            data = body.encode() if isinstance(body, str) else body
        headers = [("Content-Type", f"{kind}; charset=utf-8"), ("Content-Length", str(len(data))), ("X-Content-Type-Options", "nosniff")]
        headers.append(("Cache-Control", "max-age=86400" if kind == "application/javascript" else "no-store"))
        headers += [("X-Frame-Options", "DENY"), ("Referrer-Policy", "no-referrer")]
        if isinstance(body, Html):
            headers += [("Content-Security-Policy", body.policy), ("Vary", "Accept-Encoding")]
            if gzipped:
                headers.append(("Content-Encoding", "gzip"))
        start_response(status, headers)
        return [] if head else [data]


@dataclass(frozen=True)
class Html:
    """A page as sent: its bytes, gzipped too, and its Content-Security-Policy, made once and sent as they are to
    every request for it until its study changes (a policy hashes the page's scripts: a pass over a page of up to
    1 MB; gzip makes the 0.46 MB page of 5,000 trials 0.09 MB on the wire, in 10 ms)."""

    data: bytes
    gzipped: bytes
    policy: str

    @classmethod
    def of(cls, text: str) -> Html:
        data = text.encode()
        return cls(data, gzip.compress(data, GZIP_LEVEL, mtime=0), content_security_policy(data))


GZIP_LEVEL = 5  # 0.09 MB for the 5,000-trial page in 10 ms; level 9 saves 5% more in 3x the time


def accepts_gzip(header: str) -> bool:
    """Whether an Accept-Encoding header takes gzip (every browser's does; `gzip;q=0` refuses it)."""
    for part in header.lower().split(","):
        name, _, params = part.partition(";")
        if name.strip() in ("gzip", "*"):
            q = params.strip()
            return not q.startswith("q=") or _quality(q[2:]) > 0
    return False


def _quality(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return 0.0


_INLINE_SCRIPT = re.compile(rb"<script>(.*?)</script>", re.S)  # executable inline scripts: no src, no JSON type


def content_security_policy(page: bytes) -> str:
    """What a dashboard page may load and run: scripts from this server (plotly.js) and exactly the page's own
    inline scripts, by hash (an injected script matches none); styles inline too, as plotly sets them; images as
    plotly draws them (data:, blob:); requests only to this server (the stamp poll); no frames, forms or plugins."""
    hashes = " ".join(f"'sha256-{base64.b64encode(hashlib.sha256(m.group(1)).digest()).decode()}'" for m in _INLINE_SCRIPT.finditer(page))
    return (
        f"default-src 'none'; script-src 'self' {hashes}; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; "
        "connect-src 'self'; font-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    )


_TRIAL_NUMBER = re.compile("[0-9]+")  # ASCII only: str.isdigit() also takes "²" (which int() refuses) and "٣" (which it reads as 3)


def _segments(environ: dict) -> list[str]:
    """The request path's segments, each decoded once, as UTF-8. From the raw request target when the server
    passes it (gunicorn: RAW_URI; waitress, ours, and uwsgi: REQUEST_URI): PATH_INFO arrives already percent-decoded, so a
    study named `a/b` would be two segments and `100%41` would be decoded twice."""
    raw = environ.get("RAW_URI") or environ.get("REQUEST_URI")
    if raw:
        path = urlsplit(raw).path if "://" in raw else raw.partition("?")[0]
        mount = quote(environ.get("SCRIPT_NAME", "").rstrip("/"))
        return [unquote(p) for p in path.removeprefix(mount).split("/") if p]
    path = environ.get("PATH_INFO", "/").encode("latin-1", "replace").decode("utf-8", "replace")  # PEP 3333
    return [p for p in path.split("/") if p]


# -- serving ----------------------------------------------------------------------------------------------

SERVER_THREADS = 8  # responses computed at once; more requests wait in the queue (a study computes once per change)
IDLE_TIMEOUT_S = 30  # a connection with no complete request for this long is closed: an idle one, a half-sent request
REQUEST_DEADLINE_S = 10  # a request must arrive whole this soon after its first byte, however it trickles in
BACKLOG = 1024  # connections the kernel holds before the server accepts them
# open connections (each a socket in the event loop, not a thread); beyond it, new ones wait. Far above what slow
# clients can hold open at once when each is closed REQUEST_DEADLINE_S after its first byte; bounded by the
# process's file descriptors, which the server raises to the system's limit
CONNECTION_LIMIT = 16_000
FD_SPARE = 256  # file descriptors left for the database, logs and the listening socket


class _DeadlineChannel(waitress.channel.HTTPChannel):
    """A connection whose request must arrive whole within the server's deadline from its first byte: waitress's
    own timer is an idle one, which a client sending a byte every few seconds restarts for ever."""

    request_started: float | None = None

    def received(self, data: bytes) -> bool:
        if data and self.request_started is None:
            self.request_started = time.time()
        accepted = super().received(data)
        if self.request is None:  # every request it sent has arrived whole
            self.request_started = None
        return accepted


class _DeadlineServer(waitress.server.TcpWSGIServer):
    """waitress's server whose every cleanup turn also closes connections past their request deadline."""

    channel_class = _DeadlineChannel
    request_deadline_s: float = REQUEST_DEADLINE_S

    def maintenance(self, now: float) -> None:
        super().maintenance(now)
        for channel in list(self.active_channels.values()):
            started = getattr(channel, "request_started", None)
            if started is not None and now - started > self.request_deadline_s:
                channel.will_close = True


def _open_files_limit() -> int:
    """Raise this process's open-file limit to the system's (hard) one, and return it: each connection is a file."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = hard if hard != resource.RLIM_INFINITY else max(soft, CONNECTION_LIMIT + FD_SPARE)
    if wanted > soft:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
            soft = wanted
    return soft


class DashboardServer:
    """waitress serving a WSGI app: one event loop holds every connection, so an idle or half-sent one costs a
    socket, never a thread (wsgiref's server gave each its own, for ever); `threads` workers compute responses,
    and only for requests that arrived whole. A connection that sends nothing for `idle_timeout_s`, or whose request
    has not arrived whole `request_deadline_s` after its first byte (a slow client trickling bytes), is closed,
    checked every second; the connection limit is far above what such clients can hold open, so a normal client is
    always let in. The loop's every turn (0.5 s at most) also checks for a Ctrl-C or SIGTERM that landed in a
    finalizer and was only printed there."""

    def __init__(
        self,
        app: Callable,
        host: str,
        port: int,
        idle_timeout_s: int = IDLE_TIMEOUT_S,
        threads: int = SERVER_THREADS,
        request_deadline_s: float = REQUEST_DEADLINE_S,
    ):
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        listening = socket.create_server((host, port), family=family, backlog=BACKLOG)
        self._map: dict = {}
        adjustments = waitress.adjustments.Adjustments(
            sockets=[listening],
            threads=threads,
            channel_timeout=idle_timeout_s,
            cleanup_interval=1,
            backlog=BACKLOG,
            connection_limit=max(1, min(CONNECTION_LIMIT, _open_files_limit() - FD_SPARE)),
            asyncore_use_poll=True,  # select() stops at 1,024 file descriptors
            ident="prism-search",
        )
        dispatcher = waitress.task.ThreadedTaskDispatcher()
        dispatcher.set_thread_count(threads)
        self._server = _DeadlineServer(
            app,
            self._map,
            _sock=listening,
            dispatcher=dispatcher,
            adj=adjustments,
            bind_socket=False,
            sockinfo=(listening.family, listening.type, listening.proto, listening.getsockname()),
        )
        self._server.request_deadline_s = request_deadline_s
        logging.getLogger("waitress.queue").setLevel(logging.ERROR)  # "Task queue depth is N": requests waiting, by design
        self.server_port: int = listening.getsockname()[1]
        self._stopping, self._stopped = threading.Event(), threading.Event()
        self._stopped.set()

    def serve_forever(self) -> None:
        self._stopping.clear()
        self._stopped.clear()
        try:
            while not self._stopping.is_set():
                wasyncore.loop(timeout=0.5, map=self._map, use_poll=True, count=1)
                raise_if_interrupted()
        finally:
            self._stopped.set()

    def shutdown(self) -> None:
        """Stop `serve_forever` (from another thread) and wait until it has returned."""
        self._stopping.set()
        self._server.pull_trigger()
        self._stopped.wait()

    def server_close(self) -> None:
        self._server.task_dispatcher.shutdown()
        wasyncore.close_all(self._map)


def bind_warning(host: str) -> str | None:
    if host in LOCAL_HOSTS:
        return None
    return (
        f"warning: the dashboard is bound to {host}, not 127.0.0.1: anyone who can reach this port can read every "
        "study in the storage (there is no login); bind 127.0.0.1 and use an SSH tunnel for remote viewing"
    )


def make_server_for(
    storage_url: str,
    host: str = "127.0.0.1",
    port: int = 8080,
    app: Callable | None = None,
    idle_timeout_s: int = IDLE_TIMEOUT_S,
    request_deadline_s: float = REQUEST_DEADLINE_S,
) -> DashboardServer:
    """The dashboard's server, or another WSGI `app`'s (port 0 picks a free port: see `server.server_port`)."""
    try:
        return DashboardServer(app or Dashboard(storage_url), host, port, idle_timeout_s, request_deadline_s=request_deadline_s)
    except OSError as e:
        raise DashboardError(f"cannot listen on {host}:{port} ({e.strerror}); pass another --port or --host") from None


def read_only(app: Callable) -> Callable:
    """WSGI wrapper: GET and HEAD reach `app`, any other method is refused (405) before it does. What makes the
    stock optuna-dashboard read-only: its POST, PUT and DELETE routes create, rename and delete studies."""

    def guarded(environ: dict, start_response: Callable) -> Iterable[bytes]:
        if environ.get("REQUEST_METHOD", "GET") not in ("GET", "HEAD"):
            return Dashboard._send(start_response, "405 Method Not Allowed", "read-only dashboard: only GET", "text/plain")
        return app(environ, start_response)

    return guarded


STOCK_STUDY_PATH = re.compile(r"/api/studies/(\d+)")  # the stock dashboard's study detail and its plots


def _first_line(record: logging.LogRecord) -> bool:
    """A log record cut to its first line: a server's output names a failure, it prints no stack."""
    record.msg, record.args = record.getMessage().partition("\n")[0], ()
    return True


def stock_app(storage_url: str) -> Callable:
    """The stock optuna-dashboard on the project's reading storage, read-only. A request about a damaged study is
    answered with the study's one "unreadable" line as the JSON `reason` its page shows, before optuna-dashboard's
    own handler would print a traceback and answer a bare "internal server error"; intact studies read as usual."""
    try:
        import optuna_dashboard
    except ImportError:
        raise DashboardError("--optuna needs optuna-dashboard; pip install 'prism-search[dashboard]'") from None
    failures = logging.getLogger("optuna_dashboard._bottle_util")  # logs each failed request with its stack
    if _first_line not in failures.filters:
        failures.addFilter(_first_line)
    storage = open_readonly(storage_url)  # shared with optuna-dashboard: its trial cache makes the check cheap
    stock = optuna_dashboard.wsgi(storage)

    def contained(environ: dict, start_response: Callable) -> Iterable[bytes]:
        found = STOCK_STUDY_PATH.match(environ.get("PATH_INFO", ""))
        if found:
            study_id = int(found[1])
            try:
                storage.get_study_directions(study_id)
                storage.get_study_user_attrs(study_id)
                storage.get_study_system_attrs(study_id)
                storage.get_all_trials(study_id, deepcopy=False)
            except StudyUnreadable as e:
                body = json.dumps({"reason": str(e)})
                return Dashboard._send(start_response, "500 Internal Server Error", body, "application/json")
            except KeyError:
                pass  # no such study: optuna-dashboard answers it
        return stock(environ, start_response)

    return read_only(contained)


def serve(storage_url: str, host: str = "127.0.0.1", port: int = 8080, out=sys.stderr, stock: bool = False) -> None:
    """Serve until Ctrl-C. An empty, foreign or damaged storage stops here with its one-line error; a database
    server that is down is served as a page until it is back (`stock`, optuna-dashboard, needs it at start)."""
    if stock:
        app: Callable = stock_app(storage_url)
        name = "optuna-dashboard (read-only)"
    else:
        app = dashboard = Dashboard(storage_url)
        with contextlib.suppress(StorageUnreachable):
            dashboard.storage()
        threading.Thread(target=dashboard.warm_up, daemon=True).start()
        name = "prism-search dashboard"
    server = make_server_for(storage_url, host, port, app)
    warning = bind_warning(host)
    if warning:
        print(warning, file=out)
    print(f"{name} on http://{host}:{server.server_port}/ reading {mask_url(storage_url)} (Ctrl-C stops)", file=out)
    try:
        with sigterm_as_ctrl_c():
            server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        if not stock:
            dashboard.close()
