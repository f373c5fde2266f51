"""The one frozen pydantic base of every model read from a file (presets, markers, change
logs, the config's typed view): immutable values, hashed and compared by content.

What a subclass does with unknown keys is its own ``model_config`` (``extra``), merged with
this one by pydantic; the default, like pydantic's, is to ignore them.

Each model builds its validator when it first validates (``defer_build``), not when its
module is imported: opening a job reads the presets and the config's view, while the change
log's models, say, are only built when there is a change log to read. The wizard's first
screen then waits for less.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class FrozenModel(BaseModel):
    """A pydantic model whose instances cannot be changed after validation."""

    model_config = ConfigDict(frozen=True, defer_build=True)
