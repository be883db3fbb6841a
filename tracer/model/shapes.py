"""Shapes with their axis letters, and the sizes of the values an array holds.  No NumPy.

A stage's shape is a pair: its axis letters (the book's B, T, C, H, d, F, V, T_max) and their sizes.
"""

from __future__ import annotations

Shape = tuple[tuple[str, ...], tuple[int, ...]]  # (axis letters, sizes)

ITEMSIZE = {"float64": 8, "float32": 4}  # bytes of one value of each dtype a spec may ask for
PY_VALUE_BYTES = 32  # one number in a Python list: a pointer in its list and a float object


def shape_label(axes: tuple[str, ...], shape: tuple[int, ...]) -> str:
    return f"[{','.join(axes)}] = [{','.join(str(n) for n in shape)}]"
