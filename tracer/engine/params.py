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

import contextvars
import functools
import math
import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from tracer.spec.memory import DRAW_CHUNK, READ_AHEAD
from tracer.spec.typed import InputSpec, Spec, Weight

if TYPE_CHECKING:
    from tracer.checkpoints.refs import TensorRef


def stream(seed: int, name: str, start: int = 0) -> np.random.PCG64:
    """The weight's own stream, advanced past its first ``start`` words (as if they had been drawn)."""
    import hashlib  # here, not at the top: loading OpenSSL costs a spec without seeded draws 2 ms

    key = int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "little")
    bits = np.random.PCG64(np.random.SeedSequence([seed, key]))
    if start:
        bits.advance(start)
    return bits


PARALLEL_VALUES = 1 << 20  # seeded weights of a million values or more are drawn on a helper thread and the caller's (Draws)
CHUNK = DRAW_CHUNK  # words drawn at a time: the raw words and their doubles stay in the cache; only the result is fresh memory


def uniform(seed: int, name: str, shape: tuple[int, ...], lo: float, hi: float, dtype: np.dtype | type = np.float64) -> np.ndarray:
    """Uniform doubles on [lo, hi) from the weight's own stream, as ``dtype`` (each double rounded once): fill_uniform."""
    out = np.empty(math.prod(shape), dtype=dtype)
    fill_uniform(out, seed, name, 0, lo, hi)
    return out.reshape(shape)


def fill_uniform(out: np.ndarray, seed: int, name: str, start: int, lo: float, hi: float) -> None:
    """Values ``start`` to ``start + out.size`` of the stream, uniform on [lo, hi), written into ``out`` (flat).

    Word k (the top 53 bits of a raw 64-bit word) becomes lo + k * ((hi - lo) / 2^53): k is exact as a double and
    (hi - lo) / 2^53 is an exact power-of-two scaling, so each value is rounded once, to the same double on every
    machine.  PCG64's own doubles (``Generator.random``) are exactly k / 2^53, one word each, so they are filled
    straight into the result and scaled there (k / 2^53 * (hi - lo) is the same single rounding while
    (hi - lo) / 2^53 is a normal double, as for every bound tracer draws with): in float64 three passes and
    no temporary, and any part of a weight can be drawn on its own (the stream advanced to ``start``).  That rests
    on NumPy keeping its doubles as they are, so the first value is checked against the raw word; were it ever
    different, the words are converted here instead (``_from_words``): the same numbers.  A narrower dtype is
    rounded once, from the doubles, a chunk at a time.
    """
    n = out.size
    if n == 0:
        return
    wide = out if out.dtype == np.float64 else np.empty(min(n, CHUNK), dtype=np.float64)
    draw = np.random.Generator(stream(seed, name, start)).random
    for i in range(0, n, wide.size):
        part = wide[: min(wide.size, n - i)]
        draw(out=part)
        part *= hi - lo
        part += lo
        if wide is not out:
            out[i:i + part.size] = part
    if out[0] != _from_words(stream(seed, name, start).random_raw(1), lo, hi, out.dtype)[0]:
        out[...] = _from_words(stream(seed, name, start), lo, hi, out.dtype, n)


def _from_words(bits: np.random.PCG64 | np.ndarray, lo: float, hi: float, dtype: np.dtype | type, n: int = 0) -> np.ndarray:
    """lo + k * ((hi - lo) / 2^53) for the top 53 bits k of each raw word: n words drawn from a stream (in chunks,
    straight into the result), or the words given."""
    words = bits if isinstance(bits, np.ndarray) else None
    n = words.size if words is not None else n
    out = np.empty(n, dtype=dtype)
    scale = (hi - lo) / 9007199254740992.0  # (hi - lo) / 2^53
    wide = out if out.dtype == np.float64 else np.empty(min(n, CHUNK), dtype=np.float64)
    for i in range(0, n, CHUNK):
        raw = words[i:i + CHUNK].copy() if words is not None else bits.random_raw(min(CHUNK, n - i))  # type: ignore[union-attr]
        raw >>= np.uint64(11)  # 53 bits: exact as a double
        part = wide[i:i + raw.size] if wide is out else wide[:raw.size]
        np.multiply(raw, scale, out=part, casting="unsafe")
        part += lo
        if wide is not out:
            out[i:i + raw.size] = part  # one rounding, double to the spec's dtype
    return out


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
    (the others stay zero pages, never read nor resident), when no tied head reads the whole table.  Big seeded
    draws are shared between a helper thread and this one (Draws: the same numbers)."""
    return _draws(spec, for_run).result()


PIECE = 1 << 20  # values a Draws job draws: a big weight is shared out in pieces of its stream


class Draws:
    """Arrays being drawn on a helper thread, a piece at a time, while the caller goes on (``tracer run`` imports its
    renderer and the executor meanwhile).  ``result()`` draws the pieces the helper has not started, on the caller's
    thread (the two then work at once), waits for the helper, and gives every array; the run's kernels then have the
    cores to themselves.

    Each piece is a stretch of its weight's own stream (fill_uniform), so which thread draws it changes no number.
    An error on the helper (MemoryError) is raised by ``result()``.
    """

    def __init__(self, arrays: dict[str, np.ndarray], jobs: list[Callable[[], None]]) -> None:
        self._arrays = arrays
        self._jobs = list(reversed(jobs))  # popped from the end: the first piece is last
        self._failed: list[BaseException] = []
        self._lock = threading.Lock()
        self._helper: threading.Thread | None = None
        if jobs:
            # a copy of the caller's context: NumPy's errstate holds on the helper too (as in blas.on_threads)
            self._helper = threading.Thread(target=contextvars.copy_context().run, args=(self._work,), daemon=True,
                                            name="tracer-draws")
            self._helper.start()

    @property
    def helped(self) -> bool:
        """Whether a helper thread is drawing."""
        return self._helper is not None

    def _work(self) -> None:
        while True:
            with self._lock:
                if not self._jobs or self._failed:
                    return
                job = self._jobs.pop()
            try:
                job()
            except BaseException as e:  # raised by result()
                with self._lock:
                    self._failed.append(e)
                return

    def stop(self) -> None:
        """Start no piece more (a run that failed before its weights were used); result() would then be incomplete."""
        with self._lock:
            self._jobs.clear()

    def result(self) -> dict[str, np.ndarray]:
        self._work()
        if self._helper is not None:
            self._helper.join()
        if self._failed:
            raise self._failed[0]
        return self._arrays


def _pieces(out: np.ndarray, seed: int, name: str, lo: float, hi: float) -> list[Callable[[], None]]:
    """fill_uniform(out, ...) as jobs of PIECE values each."""
    flat = out.reshape(-1)
    return [functools.partial(fill_uniform, flat[i:i + PIECE], seed, name, i, lo, hi) for i in range(0, flat.size, PIECE)]


def draw_params(spec: Spec, by_layer: bool = False) -> Draws:
    """Every weight, as load_params(spec, for_run=True) gives them (``result()``); a big spec's seeded draws are
    started on a helper thread (Draws), in the order of the spec's weights, which is the order the steps read them.
    A given value that overflows the spec's dtype is the run's violation, not a warning (as in executor.run; the
    helper thread inherits the setting).  ``by_layer``: the weights of a layer's steps that come from checkpoint files
    are left out, for the executor to read when the layer starts (LayerWeights)."""
    with np.errstate(all="ignore"):
        return _draws(spec, for_run=True, by_layer=by_layer)


def weight_span(spec: Spec) -> dict[str, tuple[int, int]]:
    """The weights of the steps' own groups (GROUP.KEY, where GROUP is a step's ``weights``: a layer's norms, attention
    and FFN, the final norm), each with the first and the last step that reads it.  The tables (embedding, position,
    head) are not in it: a tied head reads the embedding at the end."""
    steps: dict[str, list[int]] = {}
    for i, step in enumerate(spec.steps):
        if step.weights:
            steps.setdefault(step.weights, []).append(i)
    out = {}
    for name in spec.weights:
        group = name.rpartition(".")[0]
        if group in steps:
            out[name] = (steps[group][0], steps[group][-1])
    return out


class LayerWeights:
    """tracer run's weights a layer at a time: those of a group's steps that come from checkpoint files are read before
    its first step, and every group's weights (drawn ones too) are let go after its last step, so a run holds about one
    layer's weights at a time, not the model's.  A helper thread reads the groups in order, at most READ_AHEAD groups
    ahead of the one in use (reading waits on memory, the steps on the cores).  Each array is the one read_refs gives:
    the numbers are the same either way.  An error reading a group is raised when its first step is due."""

    def __init__(self, spec: Spec, params: dict[str, np.ndarray]) -> None:
        self.spec, self.params = spec, params
        self.reads: dict[int, dict[str, TensorRef]] = {}
        self.drops: dict[int, list[str]] = {}
        for name, (first, last) in weight_span(spec).items():
            w = spec.weights[name]
            if name not in params and w.source == "file":
                self.reads.setdefault(first, {})[name] = w.value  # a TensorRef (validation made it)
            self.drops.setdefault(last, []).append(name)
        self.order: list[int] = []
        self.ready: dict[int, dict[str, np.ndarray] | BaseException] = {}  # step -> its group's arrays, or the error
        self.used = 0  # groups handed to the run so far
        self.stop = False
        self.cond = threading.Condition()
        self.helper: threading.Thread | None = None

    def begin(self, start: int) -> None:
        """Start reading, for a run from step ``start`` (--from): the groups of the steps before it are never read."""
        for i in [i for i in self.reads if i < start]:
            del self.reads[i]
        self.order = sorted(self.reads)
        if self.order:
            self.helper = threading.Thread(target=contextvars.copy_context().run, args=(self._work,), daemon=True, name="tracer-reads")
            self.helper.start()

    def _work(self) -> None:
        from tracer.checkpoints.refs import read_refs

        for k, i in enumerate(self.order):
            with self.cond:
                while not self.stop and k >= self.used + READ_AHEAD:
                    self.cond.wait()
                if self.stop:
                    return
            got: dict[str, np.ndarray] | BaseException
            try:
                got = read_refs(self.reads[i], self.spec.dtype, self.spec.allow_nonfinite)
            except BaseException as e:  # raised on the run's thread when step i is due
                got = e
            with self.cond:
                self.ready[i] = got
                self.cond.notify_all()
            if isinstance(got, BaseException):
                return

    def before(self, i: int) -> None:
        if i not in self.reads:
            return
        with self.cond:
            while i not in self.ready:
                self.cond.wait()
            got = self.ready.pop(i)
            del self.reads[i]
            self.used = self.order.index(i) + 1
            self.cond.notify_all()
        if isinstance(got, BaseException):
            raise got
        self.params.update(got)

    def after(self, i: int) -> None:
        for name in self.drops.pop(i, ()):
            self.params.pop(name, None)

    def close(self) -> None:
        """Stop the helper (a run that stopped early) and wait for it: no thread outlives the run."""
        with self.cond:
            self.stop = True
            self.cond.notify_all()
        if self.helper is not None:
            self.helper.join()
        self.ready.clear()


def _draws(spec: Spec, for_run: bool, by_layer: bool = False) -> Draws:
    """load_params's weights: read from checkpoint files, made from keywords and given values, and drawn, a big
    spec's seeded weights in pieces started on a helper thread, in the spec's order (the order the steps read them).
    ``by_layer``: a layer's weights from files are left for LayerWeights to read."""
    dtype = np.dtype(spec.dtype)
    later = weight_span(spec) if by_layer else {}
    files = {name: w.value for name, w in spec.weights.items() if w.source == "file" and name not in later}
    read: dict[str, np.ndarray] = {}
    if files:  # from checkpoint files: each tensor read once, converted to the spec's dtype
        from tracer.checkpoints.refs import read_refs

        rows = embedding_rows(spec) if for_run else None
        read = read_refs(files, spec.dtype, spec.allow_nonfinite, {"embedding": rows} if rows is not None else None)
    drawn = [name for name, w in spec.weights.items() if name not in read and w.source == "seed"]
    big = sum(math.prod(spec.weights[n].shape) for n in drawn) >= PARALLEL_VALUES and (os.cpu_count() or 1) > 1
    if big:
        import hashlib  # noqa: F401  (stream's imports, here: on the helper they would wait for the caller's GIL)

        import numpy.random  # noqa: F401
    arrays: dict[str, np.ndarray] = {}
    jobs: list[Callable[[], None]] = []
    for name, w in spec.weights.items():
        if name in read:
            arrays[name] = read[name]
        elif w.source == "file":  # by_layer: read when its layer starts
            continue
        elif big and name in drawn:
            assert spec.seed is not None, "spec validation guarantees a seed for drawn weights"
            b = bound(w, spec.init)
            arrays[name] = np.empty(w.shape, dtype=dtype)  # written by the pieces (fresh memory: nothing is touched yet)
            jobs += _pieces(arrays[name], spec.seed, "weights." + w.path, -b, b)
        else:
            arrays[name] = materialise(w, spec.seed, dtype, spec.init)
    return Draws(arrays, jobs)


def draw_inputs(spec: Spec) -> Draws:
    """load_inputs(spec) (``result()``), a big random input matrix started on a helper thread (see Draws, draw_params)."""
    with np.errstate(all="ignore"):
        return _draw_inputs(spec)


def _draw_inputs(spec: Spec) -> Draws:
    d = spec.dims
    arrays: dict[str, np.ndarray] = {}
    jobs: list[Callable[[], None]] = []
    for name, inp in spec.inputs().items():
        n = d.S if name == "source" else d.T  # as _input makes it
        if inp.value == "random" and inp.kind == "x" and n is not None and d.B * n * d.C >= PIECE and (os.cpu_count() or 1) > 1:
            assert spec.seed is not None
            arrays[name] = np.empty((d.B, n, d.C), dtype=np.dtype(spec.dtype))
            jobs += _pieces(arrays[name], spec.seed, "input.x", -1.0, 1.0)
        else:
            arrays[name] = _input(spec, name, inp)
    return Draws(arrays, jobs)


def load_inputs(spec: Spec) -> dict[str, np.ndarray]:
    """Each input stream: token ids [B,T] (int64) or the input matrix [B,T,C]."""
    return {stream: _input(spec, stream, inp) for stream, inp in spec.inputs().items()}


def _input(spec: Spec, stream: str, inp: InputSpec) -> np.ndarray:
    d = spec.dims
    n = d.S if stream == "source" else d.T
    assert n is not None
    if inp.value == "random":
        assert spec.seed is not None
        if inp.kind == "tokens":
            assert d.V is not None
            return uniform_ints(spec.seed, f"input.{stream}", (d.B, n), d.V)
        return uniform(spec.seed, "input.x", (d.B, n, d.C), -1.0, 1.0, np.dtype(spec.dtype))
    if inp.kind == "tokens":
        return np.asarray(inp.value, dtype=np.int64)
    return np.asarray(inp.value, dtype=spec.dtype)


def load_input(spec: Spec) -> np.ndarray:
    """The input of a decoder-only spec (token ids [B,T] or the matrix [B,T,C]); see load_inputs for two streams."""
    return load_inputs(spec)["target" if spec.source is not None else spec.input.kind]
