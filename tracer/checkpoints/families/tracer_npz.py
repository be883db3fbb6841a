"""The tracer family: tracer's own --save archive (weights.NAME), or an .npz keyed by tracer's weight names.

Its table maps every tracer weight name to itself; it holds weights only, so its config reader
refuses `tracer import` and says to reference the archive from the spec that made it.
"""

from __future__ import annotations

from typing import Any

from tracer.checkpoints.families.base import Layout, ModelConfig, Options, Take
from tracer.checkpoints.formats import Checkpoint
from tracer.errors import CheckpointError
from tracer.messages import at, msg


def table() -> dict[str, Take]:
    return {"{name}": Take("weights.{name}")}


def read_config(config: dict[str, Any] | None, ckpt: Checkpoint, layout: Layout, options: Options) -> ModelConfig:
    raise CheckpointError(at(ckpt.path, msg("a tracer archive holds weights, not the block's settings; reference it from the spec that made it: weights: "
                                            "{file: {path2}, layout: tracer}", path2=ckpt.path)))


LAYOUT = Layout("tracer", "tracer's own --save archive (weights.NAME) or an .npz keyed by tracer's weight names", table(), read_config,
                aliases=(("weights.blocks.0.", "weights."), ("weights.", ""), ("weights.blocks.0.", "")),
                model_types=(),  # no config.json: its settings are in the spec that made it
                weights_prefix="weights.")  # a --save archive also holds the stages: only weights.* are weights
