"""Checkpoint families, listed in one place: the registry of ``--layout`` names and config.json model_types.

A family is one file in this folder: its layout table (tracer weight name -> checkpoint key, with
the conversions of base.py) and its config reader (config.json or the tensor shapes -> the spec's
settings, refusing what tracer cannot trace faithfully), bound together in its ``LAYOUT``.  base.py
holds what they share; nothing here imports NumPy.

Adding a family: write its file (``table()``, its ``Family`` declaration, ``read_config()``, ``LAYOUT``), add its ``LAYOUT`` to
FAMILIES below, and write its tests (tests/checkpoints/test_checkpoints.py checks every family has its parts).
"""

from __future__ import annotations

from typing import Any

from tracer.checkpoints.families import (
    bert,
    cohere,
    distilbert,
    gemma,
    gemma2,
    gemma3,
    gpt2,
    gpt_neox,
    granite,
    helium,
    llama,
    mixtral,
    olmo,
    olmo2,
    opt,
    phi,
    phi3,
    pytorch,
    qwen,
    qwen3,
    smollm3,
    stablelm,
    starcoder2,
    t5,
    tracer_npz,
)
from tracer.checkpoints.families.base import Layout, config_path, received, unlisted
from tracer.checkpoints.formats import Checkpoint
from tracer.errors import CheckpointError
from tracer.messages import at, msg

FAMILIES: tuple[Layout, ...] = (gpt2.LAYOUT, llama.LAYOUT, mixtral.LAYOUT, pytorch.LAYOUT, tracer_npz.LAYOUT,
                                bert.LAYOUT, distilbert.LAYOUT, qwen.LAYOUT, gpt_neox.LAYOUT, phi.LAYOUT,
                                gemma.LAYOUT, opt.LAYOUT, qwen3.LAYOUT, gemma2.LAYOUT, t5.LAYOUT,
                                phi3.LAYOUT, helium.LAYOUT, smollm3.LAYOUT, cohere.LAYOUT, gemma3.LAYOUT,
                                stablelm.LAYOUT, olmo.LAYOUT, starcoder2.LAYOUT, granite.LAYOUT, olmo2.LAYOUT)  # in the order messages list them

_BY_NAME = {family.name: family for family in FAMILIES}


def layouts() -> dict[str, Layout]:
    """Every family by its name, as ``--layout`` and ``weights.layout`` give it."""
    return _BY_NAME


def names() -> tuple[str, ...]:
    return tuple(_BY_NAME)


def config_of(ckpt: Checkpoint) -> dict[str, Any] | None:
    """The checkpoint's config.json, which must be a mapping (a list or a string is refused), or None when there is none."""
    config = ckpt.config()
    if config is not None and not isinstance(config, dict):
        raise CheckpointError(at(config_path(ckpt), msg("expected {what}, received {got}", what=msg("a mapping of settings"), got=received(config))))
    return config


def infer(config: dict[str, Any] | None) -> str | None:
    """The layout a Hugging Face config.json's model_type names, if one does."""
    if not isinstance(config, dict):
        return None
    model_type = config.get("model_type")
    return next((lay.name for lay in FAMILIES if isinstance(model_type, str) and model_type in lay.model_types), None)


def whole_readers(ckpt: Checkpoint, config: dict[str, Any] | None) -> list[str]:
    """The layouts that map every tensor of the checkpoint and do not refuse its model_type (the ones worth
    suggesting: any other would read it in part, or compute another model)."""
    keys = ckpt.keys()
    kind = (config or {}).get("model_type")
    return [lay.name for lay in FAMILIES if lay.name != "tracer" and keys
            and not (isinstance(kind, str) and kind.startswith(lay.differ or ("\0",)))
            and any(lay.owner(k)[0] is not None for k in keys) and not unlisted(ckpt, lay)]
