"""--save: every recorded stage into one .npz archive, written atomically.

A stage kept in full is saved under its name (``np.load(path)["attn.scores"]``).  A stage kept as
statistics (--record stats) is saved as ``NAME.stats`` (mean, std, min, max), ``NAME.shape`` and
``NAME.at`` (its value at the table's sample and position).  With --with-weights each weight is saved
too, as ``weights.NAME`` (``weights.blocks.0.attn.w_q``): the archive is then a checkpoint that a spec
reads back with ``weights: {file: trace.npz, layout: tracer}``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .executor import Trace
from .outputs import write_atomic


def npz_arrays(trace: Trace, weights: dict[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {f"weights.{name}": w for name, w in (weights or {}).items()}
    for name, stage in trace.stages.items():
        if stage.data is not None:
            out[name] = stage.data
        elif stage.summary is not None:
            s = stage.summary
            out[f"{name}.stats"] = np.array([s.mean, s.std, s.min, s.max])
            out[f"{name}.shape"] = np.array(s.shape, dtype=np.int64)
            out[f"{name}.at"] = s.value
    return out


def save(trace: Trace, path: str, weights: dict[str, np.ndarray] | None = None) -> None:
    arrays = npz_arrays(trace, weights)
    savez: Callable[..., None] = np.savez  # stage names as keywords; none is 'allow_pickle'
    write_atomic(path, lambda fh: savez(fh, **arrays))
