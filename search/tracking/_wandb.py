"""Weights & Biases: one run per trial, grouped by study. Offline (files under FOLDER/wandb) unless the user
sets WANDB_MODE=online: a search must not need the network."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal, cast

from search.tracking._base import Tracker, TrialRecord

WandbMode = Literal["online", "offline", "disabled", "shared"]


class WandbTracker(Tracker):
    name = "wandb"

    def log_trial(self, study_name: str, record: TrialRecord) -> None:
        import wandb

        Path(self.target).mkdir(parents=True, exist_ok=True)
        run = wandb.init(
            project=study_name,
            group=study_name,
            name=record.run_name,
            job_type=record.role,
            dir=self.target,
            config=record.params,
            mode=cast(WandbMode, os.environ.get("WANDB_MODE", "offline")),  # W&B's own variable; offline needs no network
            reinit="create_new",
            settings=wandb.Settings(silent=True, console="off", x_disable_stats=True),
        )
        try:
            for tokens, loss in record.curve:
                run.log({"val_loss": loss, "tokens": tokens}, step=tokens)
            run.summary.update(record.metrics | {"state": record.state})
        finally:
            run.finish()
