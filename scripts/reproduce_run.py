"""Retrain one stored run of a benchmark study and compare its val loss with the stored value, bit for bit.

    .venv/bin/python scripts/reproduce_run.py bench-main 1x1,2x4,4x1 --seed 0               # the study's threads
    .venv/bin/python scripts/reproduce_run.py bench-main 2x2,4x4 --seed 0 --threads 2       # another thread count

docs/results.md cites it for two facts: a retrain at the study's thread count reproduces the stored run exactly (so the
training code did not change the arithmetic), and another thread count does not (it reorders float sums, which a
thousand steps amplify to the size of seed noise). It trains through `prism-search train --config`, exactly as a
user would, with the study's stored config written to a temporary TOML.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import optuna

from search.analysis.summary import paired_runs
from search.storage.records import stored_config


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("study")
    p.add_argument("schedule")
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--threads", type=int, default=None, help="default: the study's resources.cpus_per_trial")
    p.add_argument("--db", default="docs/results/bench.db")
    p.add_argument("--config", default=None, help="the study's TOML (default: studies/STUDY.toml)")
    args = p.parse_args()
    study = optuna.load_study(study_name=args.study, storage=f"sqlite:///{args.db}")
    stored = paired_runs(study.get_trials(deepcopy=False)).get((args.schedule, args.seed))
    if stored is None:
        raise SystemExit(f"{args.study} has no complete run of {args.schedule} at seed {args.seed}")
    config = args.config or f"studies/{args.study}.toml"
    threads = args.threads or stored_config(study).resources.cpus_per_trial
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "search.cli", "train", args.schedule, "--config", config, "--seed", str(args.seed)]
        cmd += ["--threads", str(threads), "--json", "--save", str(Path(tmp) / "model")]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    value = json.loads(out[out.index("{") :])["final_val_loss"]
    same = "bit for bit" if value == stored else f"differs by {value - stored:+.2e}"
    print(f"{args.study} {args.schedule} seed {args.seed}, {threads} thread(s): retrained {value!r}, stored {stored!r}: {same}")


if __name__ == "__main__":
    main()
