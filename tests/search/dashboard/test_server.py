"""The dashboard's web server over real loopback sockets: timeouts, idle connections that cost no thread, headers."""

import base64
import contextlib
import gzip
import hashlib
import re
import resource
import socket
import threading
import time
import urllib.request

import pytest

from search.dashboard import Dashboard, make_server_for, write_report
from search.dashboard.app import SERVER_THREADS, accepts_gzip


@contextlib.contextmanager
def serving(url: str, idle_timeout_s: int = 30, request_deadline_s: float = 10):
    app = Dashboard(url)
    server = make_server_for(url, "127.0.0.1", 0, app, idle_timeout_s=idle_timeout_s, request_deadline_s=request_deadline_s)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_port
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
        app.close()  # as `prism-search dashboard` does: a reader left open would fold the log into the file later


def half_sent(port: int) -> socket.socket:
    """A connection that sends the start of a request and never its end (the blank line)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.sendall(b"GET /study/prism HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    return sock


def test_a_half_sent_request_is_dropped_after_the_idle_timeout(dash_url):
    with serving(dash_url, idle_timeout_s=1) as port:
        sock = half_sent(port)
        started = time.monotonic()
        assert sock.recv(1024) == b""  # closed by the server, nothing answered
        waited = time.monotonic() - started
        sock.close()
    assert 0.5 < waited < 10, waited  # the timeout (1 s) plus at most a cleanup turn, not for ever


def test_a_request_answers_fast_while_hundreds_of_connections_sit_idle(dash_url):
    threads_before = threading.active_count()
    with serving(dash_url) as port:
        idle = [half_sent(port) if i % 2 else socket.create_connection(("127.0.0.1", port), timeout=30) for i in range(300)]
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/api/stamp", timeout=30).read()  # the study read once
            started = time.monotonic()
            body = urllib.request.urlopen(f"http://127.0.0.1:{port}/api/stamp?study=prism", timeout=30).read()
            took = time.monotonic() - started
            threads = threading.active_count() - threads_before
        finally:
            for sock in idle:
                sock.close()
    assert b'"stamp"' in body and took < 2, took
    assert threads <= SERVER_THREADS + 1, threads  # the workers and the loop: no thread per connection


def test_pages_forbid_framing_and_referrers_and_run_only_their_own_inline_scripts(dash_url):
    with serving(dash_url) as port:
        response = urllib.request.urlopen(f"http://127.0.0.1:{port}/study/prism", timeout=60)
        page = response.read()
    headers = response.headers
    assert headers["X-Frame-Options"] == "DENY" and headers["Referrer-Policy"] == "no-referrer"
    policy = dict(part.strip().split(" ", 1) for part in headers["Content-Security-Policy"].split(";"))
    inline = re.findall(rb"<script>(.*?)</script>", page, re.S)
    assert len(inline) == 2  # the figure loader and the refresh poll
    hashes = {f"'sha256-{base64.b64encode(hashlib.sha256(s).digest()).decode()}'" for s in inline}
    assert set(policy["script-src"].split()) == {"'self'"} | hashes  # no 'unsafe-inline', no 'unsafe-eval'
    assert policy["default-src"] == "'none'" and policy["frame-ancestors"] == "'none'"


def test_a_page_goes_gzipped_to_a_client_that_takes_gzip_and_plain_to_one_that_does_not(dash_url):
    with serving(dash_url) as port:

        def fetch(encoding: str | None):
            headers = {"Accept-Encoding": encoding} if encoding else {}
            request = urllib.request.Request(f"http://127.0.0.1:{port}/study/prism", headers=headers)
            with urllib.request.urlopen(request, timeout=60) as response:
                return response.headers, response.read()

        plain_headers, plain = fetch(None)
        zipped_headers, zipped = fetch("gzip, deflate, br")
        refused_headers, refused = fetch("gzip;q=0, identity")
    assert zipped_headers["Content-Encoding"] == "gzip" and gzip.decompress(zipped) == plain and len(zipped) < len(plain) / 3
    assert int(zipped_headers["Content-Length"]) == len(zipped) and zipped_headers["Vary"] == "Accept-Encoding"
    assert zipped_headers["Content-Security-Policy"] == plain_headers["Content-Security-Policy"]
    assert plain_headers["Content-Encoding"] is None and refused_headers["Content-Encoding"] is None and refused == plain


@pytest.mark.parametrize(
    "header, takes",
    [("gzip", True), ("GZIP;q=0.5", True), ("br, *", True), ("gzip;q=0", False), ("identity", False), ("", False), ("gzip;q=x", False)],
)
def test_accept_encoding_is_read_with_its_quality(header, takes):
    assert accepts_gzip(header) is takes


def test_the_offline_report_links_to_no_server_page(dash_url, tmp_path):
    html = write_report(dash_url, "prism", tmp_path / "report.html").read_text()
    links = re.findall(r'href="([^"]*)"', html)
    assert all(not link.startswith("/") for link in links), [link for link in links if link.startswith("/")]
    assert "api/stamp" not in html


@pytest.mark.parametrize("method", ["HEAD", "GET"])
def test_head_and_get_answer_over_the_server(dash_url, method):
    with serving(dash_url) as port:
        request = urllib.request.Request(f"http://127.0.0.1:{port}/", method=method)
        response = urllib.request.urlopen(request, timeout=60)
        body = response.read()
    assert response.status == 200 and int(response.headers["Content-Length"]) > 0
    assert (body == b"") == (method == "HEAD")


SLOW_CLIENTS = 3000


@pytest.mark.e2e
def test_a_normal_client_is_answered_while_three_thousand_slow_clients_trickle_bytes(dash_url):
    """Slowloris on loopback, bounded: 3,000 connections each sending a header byte every half second for 8 s (an
    idle timer, restarted by every byte, never closes one). Every normal request meanwhile answers within 2 s, and
    each slow connection is closed once its request deadline (here 2 s) has passed, however it trickles."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = 2 * SLOW_CLIENTS + 500  # both ends of each connection live in this process
    if hard != resource.RLIM_INFINITY and hard < needed:
        pytest.skip(f"needs {needed} open files; this system allows {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, needed), hard))
    with serving(dash_url, idle_timeout_s=30, request_deadline_s=2) as port:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/api/stamp?study=prism", timeout=30).read()  # the study read once
        slow = []
        try:
            for _ in range(SLOW_CLIENTS):
                sock = socket.create_connection(("127.0.0.1", port), timeout=30)
                sock.sendall(b"GET /study/prism HTTP/1.1\r\n")
                sock.setblocking(False)
                slow.append(sock)
            took, closed = [], set()
            ends = time.monotonic() + 8
            while time.monotonic() < ends:
                for k, sock in enumerate(slow):
                    if k not in closed:
                        try:
                            sock.send(b"X")  # one byte of a header that never ends
                        except OSError:
                            closed.add(k)
                started = time.monotonic()
                body = urllib.request.urlopen(f"http://127.0.0.1:{port}/api/stamp?study=prism", timeout=30).read()
                took.append(time.monotonic() - started)
                assert b'"stamp"' in body
                time.sleep(0.5)
            for k, sock in enumerate(slow):
                with contextlib.suppress(BlockingIOError):
                    if k not in closed and sock.recv(1024) == b"":
                        closed.add(k)
        finally:
            for sock in slow:
                sock.close()
    assert max(took) < 2, took
    assert len(closed) == SLOW_CLIENTS, len(closed)
