#!/usr/bin/env bash
# The whole check, as CI runs it (.ci/run calls this): Debian's chromium for the dashboard's browser tests, a venv
# with the test dependencies, lint, format check, type check, then the fast test tier (every test not marked e2e,
# 60 s each at most) and the e2e tier (600 s each at most), each on two pytest workers (tests sharing a module's Ray
# cluster or browser stay on one: --dist loadgroup; a third e2e worker was no faster on two quiet
# cores: 895 s against 875 s on two, one run each). The first step that fails ends it with its exit code.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_browser.sh
python3 -m venv .venv
.venv/bin/pip install -q -e '.[test]'
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
.venv/bin/python -m pytest -m "not e2e" -n 2 --dist loadgroup
.venv/bin/python -m pytest -m e2e -n 2 --dist loadgroup
