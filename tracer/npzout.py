"""--save: every recorded stage into one .npz archive, written atomically.

A stage kept in full is saved under its name (``np.load(path)["attn.scores"]``).  A stage kept as
statistics (--record stats) is saved as ``NAME.stats`` (mean, std, min, max), ``NAME.shape`` and
``NAME.at`` (its value at the table's sample and position).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .executor import Trace
from .outputs import write_atomic


def npz_arrays(trace: Trace) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    for name, stage in trace.stages.items():
        if stage.data is not None:
            out[name] = stage.data
        elif stage.summary is not None:
            s = stage.summary
            out[f"{name}.stats"] = np.array([s.mean, s.std, s.min, s.max])
            out[f"{name}.shape"] = np.array(s.shape, dtype=np.int64)
            out[f"{name}.at"] = s.value
    return out


def save(trace: Trace, path: str) -> None:
    arrays = npz_arrays(trace)
    savez: Callable[..., None] = np.savez  # stage names as keywords; none is 'allow_pickle'
    write_atomic(path, lambda fh: savez(fh, **arrays))
