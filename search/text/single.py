"""The words of `train` and `analyze`: one model trained or measured outside any study (search.study.single)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from search.attrs import ATTR_CHECKPOINT, ATTR_CHECKPOINT_ERROR
from search.text.sheet import Sheet

if TYPE_CHECKING:
    from prism import TrainResult


def train_sheet(r: TrainResult) -> Sheet:
    """The result record of one run, and where its checkpoint went (or why it did not)."""
    sheet = Sheet(f"train {r.schedule}")
    for label, value in (
        ("final val loss", f"{r.final_val_loss:.4f}"),
        ("steps", r.steps),
        ("tokens", r.tokens),
        ("tokens/s", f"{r.tokens_per_s:,.0f}"),
        ("params", f"{r.n_params:,}"),
        ("FLOPs/token", "unknown" if r.flops_per_token is None else f"{r.flops_per_token:,}"),
        ("wall time", f"{r.wall_time_s:.1f} s"),
        ("checkpoint", r.extra.get(ATTR_CHECKPOINT) or r.extra.get(ATTR_CHECKPOINT_ERROR, "-")),
    ):
        sheet.add(label, str(value))
    return sheet


def measured_text(schedule: str, corpus: str) -> str:
    """What `analyze`'s metrics table was measured on."""
    return f"schedule {schedule} on {corpus}"


def unsaved_model_text(unsaved: str) -> str:
    """`train --save` that kept the result but not the model (`unsaved`: why, as the trial stored it)."""
    return f"{unsaved}; the result above is all this run kept (fix: --save to a writable folder with free space)"
