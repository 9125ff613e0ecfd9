"""`prism-search dashboard` and `report` as a user runs them (subprocesses), plus the stock optuna-dashboard."""

import contextlib
import json
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from search.cli import main


def cli(monkeypatch, capsys, *args) -> tuple[int, str, str]:
    """Run `prism-search ARGS` in this process (main() included: its exit codes and one-line errors)."""
    monkeypatch.setattr(sys, "argv", ["prism-search", *args])
    with pytest.raises(SystemExit) as done:
        main()
    out = capsys.readouterr()
    return done.value.code, out.out, out.err


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(url: str, proc: subprocess.Popen, timeout: float = 60) -> bytes:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        try:
            return urllib.request.urlopen(url, timeout=5).read()
        except OSError:
            time.sleep(0.3)
    raise TimeoutError(url)


def test_report_writes_one_self_contained_file(dash_url, tmp_path, monkeypatch, capsys):
    out = tmp_path / "report.html"
    code, stdout, stderr = cli(monkeypatch, capsys, "report", "prism", "-o", str(out), "--storage", dash_url)
    assert code == 0 and "wrote" in stdout, stderr
    said = [line for line in stdout.splitlines() if line.strip()]  # one line, however long the path (tmp_path is)
    assert len(said) == 1 and said[0].startswith(f"wrote {out} (") and said[0].endswith("open it in any browser, no network needed")
    html = out.read_text()
    assert "<script src=" not in html and "Plotly.newPlot" in html and "plotly.js v" in html  # plotly inlined
    assert html.count('data-figure="fig-') == 7 and "gap to uniform" in html


@pytest.mark.parametrize(
    "name, output, message",
    [
        ("nope", "r.html", "no study named 'nope'"),
        ("prism", "missing/r.html", "folder '{tmp}/missing' does not exist"),
    ],
)
def test_report_bad_input_is_one_line_and_exit_2(dash_url, tmp_path, monkeypatch, capsys, name, output, message):
    code, _, stderr = cli(monkeypatch, capsys, "report", name, "-o", str(tmp_path / output), "--storage", dash_url)
    assert code == 2 and message.format(tmp=tmp_path) in stderr and len(stderr.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []


def test_dashboard_command_warns_off_localhost_masks_the_password_and_serves_the_outage():
    port = free_port()
    url = f"postgresql+psycopg://prism:s3cret-pw@127.0.0.1:{free_port()}/db"  # nothing listens there
    proc = subprocess.Popen(
        [sys.executable, "-m", "search.cli", "dashboard", "--storage", url, "--host", "0.0.0.0", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_for(f"http://127.0.0.1:{port}/static/plotly.min.js", proc)
        with pytest.raises(urllib.error.HTTPError) as page:  # the database is down: a 503 page, served
            urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=30)
        body = page.value.read().decode()
        assert page.value.code == 503 and "unreachable" in body and "s3cret-pw" not in body
    finally:
        proc.terminate()
    out = proc.communicate(timeout=30)[0]
    assert "warning: the dashboard is bound to 0.0.0.0" in out and f":{port}/" in out
    assert "prism:***@" in out and "s3cret-pw" not in out


def dump(url: str) -> list[str]:
    """Every row of a SQLite database as SQL (its bytes move when a reader folds in the write-ahead log)."""
    with contextlib.closing(sqlite3.connect(url.removeprefix("sqlite:///"))) as conn:
        return list(conn.iterdump())


@pytest.mark.e2e
def test_dashboard_optuna_flag_starts_the_stock_dashboard_read_only(dash_url):
    """optuna-dashboard creates, renames and deletes studies on POST/PUT/DELETE: each is refused, nothing changes."""
    before = dump(dash_url)
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "search.cli", "dashboard", "--optuna", "--storage", dash_url, "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    base = f"http://127.0.0.1:{port}/api"
    try:
        studies = json.loads(wait_for(f"{base}/studies", proc))["study_summaries"]
        writes = [
            ("POST", "/studies", {"study_name": "created", "directions": ["minimize"]}),
            ("POST", "/studies/0/rename", {"study_name": "renamed"}),
            ("PUT", "/studies/0/note", {"version": 1, "body": "note"}),
            ("DELETE", "/studies/0", None),
            ("POST", "/trials/0/user-attrs", {"user_attrs": {"x": 1}}),
        ]
        for method, path, body in writes:
            data = json.dumps(body).encode() if body is not None else None
            request = urllib.request.Request(f"{base}{path}", data=data, method=method, headers={"Content-Type": "application/json"})
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(request, timeout=30)
            assert refused.value.code == 405, (method, path)
        after = json.loads(urllib.request.urlopen(f"{base}/studies", timeout=30).read())["study_summaries"]
    finally:
        proc.terminate()
        out = proc.communicate(timeout=30)[0]
    assert "prism" in {s["study_name"] for s in studies} and after == studies
    assert dump(dash_url) == before
    assert "optuna-dashboard (read-only)" in out
