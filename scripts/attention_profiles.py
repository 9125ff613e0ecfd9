"""Per-layer attention distance of chosen schedules, for docs/results.md (question 6: do early layers get more local?).

Trains each schedule once with a study's config at its seed through `prism-search train`'s own path
(search.study.single.train_single, on the study's cpus_per_trial threads like its workers, so each model is the
study's run bit for bit) and measures every layer on the corpus's validation text (prism.analysis).
The table goes to docs/results/attention.json, which scripts/results.py draws without retraining:

    .venv/bin/python scripts/attention_profiles.py --config studies/bench-main.toml 2x6 2x2,4x4 1x2,2x4
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

from prism import Schedule
from search.config import load_config
from search.study.single import train_single

OUT = Path(__file__).resolve().parents[1] / "docs" / "results" / "attention.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("schedules", nargs="+", help="HEADSxLAYERS schedules, e.g. 2x6 1x2,2x4")
    parser.add_argument("--config", required=True, help="the study TOML whose model, training and data to use")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    config = load_config(args.config)
    table = json.loads(args.out.read_text()) if args.out.is_file() else {}
    for text in args.schedules:
        run = train_single(config, Schedule.parse(text), analyze=True)
        assert run.profile is not None
        table[str(run.schedule)] = {
            "study": config.name,
            "seed": config.seed,
            "val_loss": run.result.final_val_loss,
            "layers": [dataclasses.asdict(m) for m in run.profile],
        }
        print(
            f"{run.schedule}: val loss {run.result.final_val_loss:.4f}; mean attention distance per layer (tokens): "
            + " ".join(f"{m.mad:.1f}" for m in run.profile),
            flush=True,
        )
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(table, indent=1))  # after each schedule: a stop keeps what was measured


if __name__ == "__main__":
    main()
