"""`kind = "prism"` (the default): prism's own `PrismLM` trained by its own loop (search.runner.worker)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class PrismTrainer(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["prism"] = Field("prism", description="prism's own loop trains PrismLM (the default)")

    def refuses(self, family: str) -> str | None:
        return None  # PrismLM takes any valid schedule
