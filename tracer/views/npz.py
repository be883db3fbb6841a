"""--save: every recorded stage into one .npz archive, written atomically under tracer's mark.

A stage kept in full is saved under its name (``np.load(path)["attn.scores"]``).  A stage kept as
statistics (--record stats) is saved as ``NAME.stats`` (mean, std, min, max), ``NAME.shape`` and
``NAME.at`` (its value at the table's sample and position).  With --with-weights each weight is saved
too, as ``weights.NAME`` (``weights.blocks.0.attn.w_q``): the archive is then a checkpoint that a spec
reads back with ``weights: {file: trace.npz, layout: tracer}``.

The archive is what ``np.savez`` writes (uncompressed members ``NAME.npy``, ZIP64 when large), but
built member by member with zipfile: np.savez takes the names as keyword arguments, so a stage named
``file`` or ``allow_pickle`` would clash with its own parameters.  The zip comment is tracer's mark
(files.npz_mark); np.load ignores it.
"""

from __future__ import annotations

import contextlib
import zipfile
from typing import IO, BinaryIO

import numpy as np

from tracer import files
from tracer.engine.executor import Recording
from tracer.process import signals_held


def npz_arrays(trace: Recording, weights: dict[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
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


def write_npz(fh: BinaryIO, arrays: dict[str, np.ndarray]) -> None:
    """The archive np.load reads back, any name being just a name, marked as tracer's.

    Ctrl-C or SIGTERM may stop the writing of an array, never the opening or closing of the archive
    or of a member (signals_held): a zip half-opened cannot be closed, and the signal would end as
    an internal error instead of exit 130/143."""
    zf = None
    try:
        with signals_held():
            zf = zipfile.ZipFile(fh, "w", zipfile.ZIP_STORED, allowZip64=True)
        for name, array in arrays.items():
            member = None
            try:
                with signals_held():
                    member = zf.open(f"{name}.npy", "w", force_zip64=True)
                np.lib.format.write_array(member, np.asanyarray(array), allow_pickle=False)
            except BaseException:
                _close_quietly(member)  # a member cut short mid-write may fail to close: that must not hide why it stopped
                raise
            with signals_held():
                member.close()
        zf.comment = files.npz_mark(zf.infolist())
    except BaseException:
        _close_quietly(zf)  # the archive is write_atomic's temporary, removed on the way out
        raise
    with signals_held():
        zf.close()


def _close_quietly(handle: zipfile.ZipFile | IO[bytes] | None) -> None:
    if handle is not None:
        with signals_held(), contextlib.suppress(Exception):
            handle.close()


def save(trace: Recording, path: str, weights: dict[str, np.ndarray] | None = None, force: bool = False) -> None:
    arrays = npz_arrays(trace, weights)
    files.write_atomic(path, lambda fh: write_npz(fh, arrays), "--save", "npz", force)
