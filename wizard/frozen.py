"""The one frozen pydantic base of every model read from a file (presets, markers, change
logs, the config's typed view): immutable values, hashed and compared by content.

What a subclass does with unknown keys is its own ``model_config`` (``extra``), merged with
this one by pydantic; the default, like pydantic's, is to ignore them.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class FrozenModel(BaseModel):
    """A pydantic model whose instances cannot be changed after validation."""

    model_config = ConfigDict(frozen=True)
