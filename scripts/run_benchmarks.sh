#!/usr/bin/env bash
# The evidence benchmark (issue 11, docs/results.md), run through the product's own commands.
# Every stage is an ordinary resumable study step: run this script again after any stop (Ctrl-C, a killed
# session) and it continues where the database says it is. Results go to docs/results/bench.db.
#   bash scripts/run_benchmarks.sh            # all stages in order
#   bash scripts/run_benchmarks.sh confirm    # one stage
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
STORAGE=sqlite:///docs/results/bench.db
cli() { "$PY" -m search.cli "$@"; }

stage_main() {     # the grid at the study seed: every monotone schedule once (2.05 M tokens each)
    cli run studies/bench-main.toml
}
stage_confirm() {  # every schedule and uniform again on two fresh seeds: 3 paired seeds per schedule
    cli confirm bench-main --top 27 --seeds 2 --storage "$STORAGE"
}
stage_long() {     # a subset of bench-main at 4x the budget (8.2 M tokens), 2 paired seeds
    cli run studies/bench-long.toml
}
stage_long3() {    # bench-long's 5 schedules and uniform on 2 fresh seeds (1000, 1001; confirm needs >= 2), so its gaps get t intervals
    cli confirm bench-long --top 5 --seeds 2 --storage "$STORAGE"
}
stage_width() {    # the same subset at d_model 256, bench-main's budget, 2 paired seeds
    cli run studies/bench-width.toml
}
stage_free() {     # non-monotone schedules: TPE over the free family at bench-main's budget, then its top 3 confirmed
    cli run studies/bench-free.toml
    cli confirm bench-free --top 3 --seeds 2 --storage "$STORAGE"
}

stages=${1:-main confirm long width free long3}
for s in $stages; do
    echo "== stage $s ($(date -u +%H:%M:%S))"
    "stage_$s"
done
