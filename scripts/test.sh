#!/usr/bin/env bash
# The whole check, as CI runs it (.ci/run calls this): Debian's chromium for the dashboard's browser tests, a venv
# with the test dependencies, lint, format check, then the type check beside the fast test tier (every test not
# marked e2e, 60 s each at most), then the e2e tier (600 s each at most); each tier on two pytest workers (tests
# sharing a module's Ray cluster or browser stay on one: --dist loadgroup; a third e2e worker was no faster on two
# quiet cores: 895 s against 875 s on two, one run each). The first step that fails ends it with its exit code.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_browser.sh
python3 -m venv .venv
.venv/bin/pip install -q -e '.[test]'
# the project's own bytecode, once: where PYTHONDONTWRITEBYTECODE is set (as on the development machine), each of
# the suite's processes (CLI commands, Ray workers) would otherwise compile prism/ and search/ again
.venv/bin/python -m compileall -q prism search
.venv/bin/ruff check .
.venv/bin/ruff format --check .
# the type check runs beside the fast tier, whose two workers leave about a quarter of the two cores idle
types_log=$(mktemp)
.venv/bin/mypy > "$types_log" 2>&1 &
types=$!
.venv/bin/python -m pytest -m "not e2e" -n 2 --dist loadgroup
wait "$types" || { cat "$types_log"; exit 1; }
cat "$types_log"
.venv/bin/python -m pytest -m e2e -n 2 --dist loadgroup
