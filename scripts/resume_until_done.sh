#!/usr/bin/env bash
# Keep a long study (e.g. the pre-registered experiment) going in the background: `resume` it again whenever its
# driver stops (a machine shared with others: another user's `ray stop` ends every Ray cluster on it), until it
# says it has ended, or until the file STOP_FILE exists (touch it, then Ctrl-C the driver: its pair is queued again).
#   nohup bash scripts/resume_until_done.sh prereg-long sqlite:///docs/results/prereg.db > prereg.log 2>&1 &
set -u
study=${1:?study name}
storage=${2:?storage URL}
stop_file=${STOP_FILE:-.resume_until_done.stop}
prism=${PRISM_SEARCH:-.venv/bin/prism-search}
while [ ! -e "$stop_file" ]; do
  echo "=== resume at $(date -u +%FT%TZ)"
  out=$("$prism" resume "$study" --storage "$storage" 2>&1 | tee /dev/stderr)
  if grep -q "has ended\|nothing to run" <<<"$out"; then
    break
  fi
  sleep 30
done
