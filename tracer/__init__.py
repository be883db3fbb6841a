"""tracer: a shape-and-value tracer for Transformer blocks.

The Python API (docs/api.md), loaded on first use so that ``import tracer`` and the command line
import no NumPy:

- ``tracer.load(path_or_dict)`` -> a Model: the validated spec (a dict is checked like a YAML file) and its weights,
  read once and held: ``m.trace(tokens=...)``, ``m.lens()``, ``m.patch(clean, corrupt)``, ``m.diff(other)``;
- ``tracer.trace(model_or_spec_or_path_or_dict, **options)`` -> a Trace: ``t["norm1"]`` is the array,
  ``t.shape_of("norm1")``, ``t.violations``, ``t.to_json()``, ``t.save(path)``, ``t.attention()``, ``t.page(path)``;
- ``tracer.diff(a, b, ...)`` -> a Diff: ``.first_divergence``, ``.exit_code``, ``.stages``, ``.hint``;
- ``tracer.recorder("mine.npz")`` -> a context manager recording your own block's arrays;
- ``tracer.patch(clean, corrupt, stage=..., token=...)`` -> a PatchGrid: activation patching, stages x positions;
- ``tracer.attribution(spec, token=..., against=..., position=...)`` -> an Attribution: the logit split into its parts;
- ``tracer.attribution_patching(clean, corrupt, stage=..., real=...)`` -> an EstimateGrid: every patch cell to first order;
- ``TracerError`` and its kin (``SpecError``, ``UsageError``): every error the API raises.

A Trace and a Diff show as the table the terminal shows, in Jupyter and with rich.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tracer.version import __version__ as __version__

__all__ = ["Diff", "Model", "Recorder", "SpecError", "StageShape", "Trace", "TracerError", "UsageError", "diff", "load", "recorder",
           "trace", "PatchGrid", "patch", "Attribution", "attribution",
           "EstimateGrid", "attribution_patching"]

if TYPE_CHECKING:
    from tracer.attribute.command import attribution as attribution
    from tracer.attribute.command import attribution_patching as attribution_patching
    from tracer.attribute.core import Attribution as Attribution
    from tracer.attribute.estimate import EstimateGrid as EstimateGrid
    from tracer.compare.recording import Recorder as Recorder
    from tracer.compare.recording import recorder as recorder
    from tracer.errors import SpecError as SpecError
    from tracer.errors import TracerError as TracerError
    from tracer.errors import UsageError as UsageError
    from tracer.front.comparison import Diff as Diff
    from tracer.front.comparison import diff as diff
    from tracer.front.model import Model as Model
    from tracer.front.model import load as load
    from tracer.front.run_trace import StageShape as StageShape
    from tracer.front.run_trace import Trace as Trace
    from tracer.front.run_trace import trace as trace
    from tracer.patching.run import PatchGrid as PatchGrid
    from tracer.patching.run import patch_api as patch

# name -> the module defining it.  No module of the package is named like one of these functions, so importing a
# submodule never rebinds them.
_LAZY = {"load": "front.model", "Model": "front.model", "trace": "front.run_trace", "Trace": "front.run_trace", "StageShape": "front.run_trace",
         "diff": "front.comparison", "Diff": "front.comparison", "recorder": "compare.recording", "Recorder": "compare.recording",
         "TracerError": "errors", "SpecError": "errors", "UsageError": "errors", "patch": "patching.run", "PatchGrid": "patching.run",
         "attribution": "attribute.command", "Attribution": "attribute.core", "attribution_patching": "attribute.command",
         "EstimateGrid": "attribute.estimate"}


def __getattr__(name: str) -> Any:
    import importlib

    if name not in _LAZY:
        raise AttributeError(f"module 'tracer' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), "patch_api" if name == "patch" else name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
