"""The base every spec model shares: unknown fields are errors, models are frozen."""

from pydantic import BaseModel, ConfigDict


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
