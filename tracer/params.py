"""Turn a validated spec into arrays: given weights, keywords, and seeded draws.

Seeded draws must give the same numbers on every machine and NumPy version.
NumPy promises stable *bit streams* for its bit generators (PCG64, SeedSequence)
but not for distribution methods such as ``Generator.normal``, which may change
between releases.  So we take raw 64-bit words from PCG64 and turn them into
uniform doubles ourselves with exact IEEE arithmetic.  Each weight has its own
stream, keyed by the seed and the weight's name, so adding a weight to a spec
never changes the others.

Distributions (documented in docs/reference/spec.md):
- a matrix [n_in, n_out] (attention W_Q, W_K, W_V, W_O; FFN W_1, W_2, W_3; the separate head):
  uniform on [-1/sqrt(n_in), 1/sqrt(n_in)], PyTorch's nn.Linear default; with ``init: xavier``,
  uniform on [-sqrt(6/(n_in+n_out)), sqrt(6/(n_in+n_out))] (Glorot and Bengio 2010: the original
  Transformer's, nn.Transformer's and Xiong et al. 2020's). Same stream, another bound;
- a vector drawn on purpose (``b1: random``): uniform on [-1/sqrt(n), 1/sqrt(n)];
- the embedding table [V,C], the position table [T_max,C] and ``x: random``:
  uniform on [-1, 1];
- ``tokens: random``: ids uniform on 0..V-1.
"""

from __future__ import annotations

import math
import os

import numpy as np

from .memory import DRAW_CHUNK
from .spec import Spec, Weight


def stream(seed: int, name: str) -> np.random.PCG64:
    import hashlib  # here, not at the top: loading OpenSSL costs a spec without seeded draws 2 ms

    key = int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "little")
    return np.random.PCG64(np.random.SeedSequence([seed, key]))


PARALLEL_VALUES = 1 << 20  # seeded weights of a million values or more are drawn on two threads
CHUNK = DRAW_CHUNK  # words drawn at a time: the raw words and their doubles stay in the cache; only the result is fresh memory


def uniform(seed: int, name: str, shape: tuple[int, ...], lo: float, hi: float, dtype: np.dtype | type = np.float64) -> np.ndarray:
    """Uniform doubles on [lo, hi) from the weight's own stream, as ``dtype`` (each double rounded once).

    Word k (the top 53 bits of a raw 64-bit word) becomes lo + k * ((hi - lo) / 2^53): k is exact as a double and
    (hi - lo) / 2^53 is an exact power-of-two scaling, so each value is rounded once, to the same double on every
    machine.  The stream is drawn in chunks straight into the result (a chunked draw is the same stream).
    """
    n = math.prod(shape)
    bits = stream(seed, name)
    out = np.empty(n, dtype=dtype)
    scale = (hi - lo) / 9007199254740992.0  # (hi - lo) / 2^53
    wide = out if out.dtype == np.float64 else np.empty(min(n, CHUNK), dtype=np.float64)
    for i in range(0, n, CHUNK):
        raw = bits.random_raw(min(CHUNK, n - i))
        raw >>= np.uint64(11)  # 53 bits: exact as a double
        part = wide[i:i + raw.size] if wide is out else wide[:raw.size]
        np.multiply(raw, scale, out=part, casting="unsafe")
        part += lo
        if wide is not out:
            out[i:i + raw.size] = part  # one rounding, double to the spec's dtype
    return out.reshape(shape)


def uniform_ints(seed: int, name: str, shape: tuple[int, ...], high: int) -> np.ndarray:
    u = uniform(seed, name, shape, 0.0, 1.0)
    return np.minimum((u * high).astype(np.int64), high - 1)


def bound(w: Weight, init: str = "default") -> float:
    """Drawn values are uniform on [-bound, bound] (the module docstring gives the rules)."""
    if w.path == "embedding" or w.path == "position":
        return 1.0
    if init == "xavier" and len(w.shape) == 2:
        return math.sqrt(6.0 / (w.shape[0] + w.shape[1]))
    return 1.0 / math.sqrt(w.shape[0])


def materialise(w: Weight, seed: int | None, dtype: np.dtype, init: str = "default") -> np.ndarray:
    if w.source == "given":
        return np.asarray(w.value, dtype=dtype)
    if w.source == "zeros":
        return np.zeros(w.shape, dtype=dtype)
    if w.source == "ones":
        return np.ones(w.shape, dtype=dtype)
    if w.source == "identity":
        return np.eye(w.shape[0], dtype=dtype)
    assert seed is not None, "spec validation guarantees a seed for drawn weights"
    b = bound(w, init)
    return uniform(seed, "weights." + w.path, w.shape, -b, b, dtype)


def embedding_rows(spec: Spec) -> list[int] | None:
    """The embedding rows a run reads when the table comes from a checkpoint and no tied head reads all of it, else None.

    A run then reads only these rows of the file: GPT-2's wte is 50257 rows, a sentence uses a few.
    """
    w = spec.weights.get("embedding")
    if w is None or w.source != "file" or spec.block.head == "tied":
        return None
    ids = [load_inputs(spec)[stream] for stream, inp in spec.inputs().items() if inp.kind == "tokens"]
    return sorted({int(i) for a in ids for i in a.ravel()})


def load_params(spec: Spec, for_run: bool = False) -> dict[str, np.ndarray]:
    """Every weight as an array.  ``for_run``: an embedding table from a checkpoint holds only the rows the input uses
    (the others stay zero pages, never read nor resident), when no tied head reads the whole table."""
    dtype = np.dtype(spec.dtype)
    files = {name: w.value for name, w in spec.weights.items() if w.source == "file"}
    read: dict[str, np.ndarray] = {}
    if files:  # from checkpoint files: each tensor read once, converted to the spec's dtype
        from .checkpoints.refs import read_refs

        rows = embedding_rows(spec) if for_run else None
        read = read_refs(files, spec.dtype, spec.allow_nonfinite, {"embedding": rows} if rows is not None else None)
    drawn = [name for name, w in spec.weights.items() if name not in read and w.source == "seed"]
    if sum(math.prod(spec.weights[n].shape) for n in drawn) >= PARALLEL_VALUES and (os.cpu_count() or 1) > 1:
        from .blas import on_threads  # each weight has its own stream: two threads give the same numbers (the bit

        def draw(names: list[str]) -> list[np.ndarray]:  # generator works without the GIL), in about half the time
            return [materialise(spec.weights[n], spec.seed, dtype, spec.init) for n in names]

        halves = [drawn[0::2], drawn[1::2]]
        for names, arrays in zip(halves, on_threads(draw, halves)):
            read.update(zip(names, arrays))
    return {name: read[name] if name in read else materialise(w, spec.seed, dtype, spec.init) for name, w in spec.weights.items()}


def load_inputs(spec: Spec) -> dict[str, np.ndarray]:
    """Each input stream: token ids [B,T] (int64) or the input matrix [B,T,C]."""
    d = spec.dims
    out = {}
    for stream, inp in spec.inputs().items():
        n = d.S if stream == "source" else d.T
        assert n is not None
        if inp.value == "random":
            assert spec.seed is not None
            if inp.kind == "tokens":
                assert d.V is not None
                out[stream] = uniform_ints(spec.seed, f"input.{stream}", (d.B, n), d.V)
            else:
                out[stream] = uniform(spec.seed, "input.x", (d.B, n, d.C), -1.0, 1.0, np.dtype(spec.dtype))
        elif inp.kind == "tokens":
            out[stream] = np.asarray(inp.value, dtype=np.int64)
        else:
            out[stream] = np.asarray(inp.value, dtype=spec.dtype)
    return out


def load_input(spec: Spec) -> np.ndarray:
    """The input of a decoder-only spec (token ids [B,T] or the matrix [B,T,C]); see load_inputs for two streams."""
    return load_inputs(spec)["target" if spec.source is not None else spec.input.kind]
