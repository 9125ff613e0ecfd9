"""TensorBoard: event files under FOLDER/STUDY/trial-NNNNN, so the study is the folder TensorBoard groups by."""

from __future__ import annotations

from pathlib import Path

from search.tracking._base import Tracker, TrialRecord


class TensorBoardTracker(Tracker):
    name = "tensorboard"

    def log_trial(self, study_name: str, record: TrialRecord) -> None:
        from torch.utils.tensorboard import SummaryWriter

        with SummaryWriter(log_dir=str(Path(self.target) / study_name / record.run_name)) as writer:
            for tokens, loss in record.curve:
                writer.add_scalar("val_loss", loss, global_step=tokens)
            for key, value in record.metrics.items():
                writer.add_scalar(key, value, global_step=0)
            final = {"final_val_loss": record.curve[-1][1]} if record.curve else {}
            writer.add_hparams(record.params | {"state": record.state}, final, run_name=".")
