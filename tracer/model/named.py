"""The engine code a record names as ``module:function``, imported on first use.

The engine is the NumPy layer above the model, so a record (an op's, tracer/model/ops.py; an activation's,
tracer/model/activations.py) names its code instead of importing it.  Nothing here imports NumPy.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

_RESOLVED: dict[str, Callable[..., Any]] = {}


def resolve(ref: str | Callable[..., Any]) -> Callable[..., Any]:
    """The function ``ref`` names as ``module:function``, imported on first use (then kept); a function given
    itself (a record registered at run time, as a test's) is that function."""
    if callable(ref):
        return ref
    fn = _RESOLVED.get(ref)
    if fn is None:
        module, _, name = ref.partition(":")
        fn = _RESOLVED[ref] = getattr(importlib.import_module(module), name)
    return fn
