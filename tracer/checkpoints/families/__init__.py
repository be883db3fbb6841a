"""Checkpoint families, listed in one place: the registry of ``--layout`` names and config.json model_types.

A family is one file in this folder: its layout table (tracer weight name -> checkpoint key, with
the conversions of base.py) and its config reader (config.json or the tensor shapes -> the spec's
settings, refusing what tracer cannot trace faithfully), bound together in its ``LAYOUT``.  base.py
holds what they share; nothing here imports NumPy.

Adding a family: write its file (``table()``, ``read_config()``, ``LAYOUT``), add its ``LAYOUT`` to
FAMILIES below, and write its tests (tests/checkpoints/test_checkpoints.py checks every family has its parts).
"""

from __future__ import annotations

from typing import Any

from tracer.checkpoints.families import gpt2, llama, pytorch, tracer_npz
from tracer.checkpoints.families.base import Layout

FAMILIES: tuple[Layout, ...] = (gpt2.LAYOUT, llama.LAYOUT, pytorch.LAYOUT, tracer_npz.LAYOUT)  # in the order messages list them

_BY_NAME = {family.name: family for family in FAMILIES}


def layouts() -> dict[str, Layout]:
    """Every family by its name, as ``--layout`` and ``weights.layout`` give it."""
    return _BY_NAME


def names() -> tuple[str, ...]:
    return tuple(_BY_NAME)


def infer(config: dict[str, Any] | None) -> str | None:
    """The layout a Hugging Face config.json's model_type names, if one does."""
    if not config:
        return None
    model_type = config.get("model_type")
    return next((lay.name for lay in FAMILIES if model_type in lay.model_types), None)
