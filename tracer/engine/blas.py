"""The BLAS NumPy calls, and how many threads it runs: attention's heads go on Python threads instead.

Attention is many small products (a head and a block of 256 query rows at a time). A multi-threaded
BLAS splits each one between its threads, which then wait for each other at its end: dozens of
waits per head, and on a shared, loaded machine each wait can cost a scheduler slice (measured here:
a 12-head, 1024-position attention took 0.2 s on a quiet machine and over 1 s under load). So
``kernels.attention.attend`` runs whole heads on as many Python threads as the BLAS has, each calling the BLAS
with one thread (NumPy lets go of the GIL in its loops and BLAS calls). Each head is then computed by
one thread start to end: the numbers do not depend on how the heads were shared out.

Only OpenBLAS (the BLAS in NumPy's own wheels) is told; with any other, or where it cannot be found,
``workers`` is 1 and attention runs its heads in turn, as before.  The ``tracer`` command also sets
OPENBLAS_THREAD_TIMEOUT (unless set) so that OpenBLAS's own idle threads sleep at once instead of spinning
on the cores these threads need (tracer/__main__.py).
"""

from __future__ import annotations

import contextvars
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

R = TypeVar("R")
Item = TypeVar("Item")

_lock = threading.Lock()
_found: tuple[Callable[[], int], Callable[[int], None]] | None | bool = False  # False: not looked for yet


def _openblas() -> tuple[Callable[[], int], Callable[[int], None]] | None:
    """OpenBLAS's get/set_num_threads, from the library already loaded in this process (Linux), or None."""
    global _found
    if _found is not False:
        return _found  # type: ignore[return-value]
    _found = None
    import ctypes

    found = _symbols(("_get_num_threads", "_set_num_threads"))
    if found is not None:
        get, put = found
        get.restype, get.argtypes = ctypes.c_int, []
        put.restype, put.argtypes = None, [ctypes.c_int]
        _found = (get, put)
    return _found


def core() -> str | None:
    """The kernels OpenBLAS chose for this CPU (Haswell, SkylakeX, ...), for the benchmarks' lines; None: not OpenBLAS."""
    import ctypes

    found = _symbols(("_get_corename",))
    if found is None:
        return None
    found[0].restype, found[0].argtypes = ctypes.c_char_p, []
    name = found[0]()
    return name.decode(errors="replace") if isinstance(name, bytes) else None


def _symbols(suffixes: tuple[str, ...]) -> list[Any] | None:
    """The functions openblas{suffix} of the OpenBLAS already loaded in this process (under any of its builds' names)."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            paths = sorted({line.split()[-1] for line in maps if "openblas" in line.rsplit("/", 1)[-1].lower()})
    except OSError:
        return None
    import ctypes

    for path in paths:
        try:
            lib: Any = ctypes.CDLL(path)
        except OSError:
            continue
        for name in ("scipy_openblas{}64_", "scipy_openblas{}", "openblas{}64_", "openblas{}"):
            fns = [getattr(lib, name.format(suffix), None) for suffix in suffixes]
            if all(fn is not None for fn in fns):
                return fns
    return None


def workers(tasks: int, work: int, at_least: int = 1 << 20) -> int:
    """How many Python threads should share ``tasks`` heads of ``work`` scalar operations in all: the BLAS's threads
    (OPENBLAS_NUM_THREADS and the like are respected), or 1 when the BLAS is unknown or the work small."""
    if tasks < 2 or work < at_least:
        return 1
    found = _openblas()
    if found is None:
        return 1
    return max(1, min(tasks, found[0](), os.cpu_count() or 1))


@contextmanager
def single_threaded() -> Iterator[None]:
    """The BLAS runs each call on one thread inside the block (the callers are the threads)."""
    found = _openblas()
    if found is None:
        yield
        return
    get, put = found
    with _lock:
        before = get()
        put(1)
        try:
            yield
        finally:
            put(before)


def on_threads(fn: Callable[[Any], R], parts: list[Any]) -> list[R]:
    """fn(part) for each part, each on its own thread (the first on this one); the results in order.

    Plain threads, not concurrent.futures: that import (with logging) costs a run 3 ms.  An exception
    in any part is raised here, after every thread has finished.  Each thread runs in a copy of the caller's
    context, so that NumPy's errstate (a context variable) holds there too: a run that silences NaN and Inf
    warnings prints none from its threads either.
    """
    results: list[Any] = [None] * len(parts)
    errors: list[BaseException] = []

    def one(i: int) -> None:
        try:
            results[i] = fn(parts[i])
        except BaseException as e:  # re-raised in the caller's thread
            errors.append(e)

    threads = [threading.Thread(target=contextvars.copy_context().run, args=(one, i), daemon=True) for i in range(1, len(parts))]
    for t in threads:
        t.start()
    one(0)
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results


def by_spans(fn: Callable[[tuple[int, int]], None], count: int, work: int, at_least: int) -> None:
    """fn((lo, hi)) for consecutive spans covering range(count), one span a thread (as many as workers gives for
    ``work`` scalar operations, ``at_least`` of them before a second thread is worth it); one span when not."""
    n = workers(count, work, at_least)
    cut = [count * i // n for i in range(n + 1)]
    on_threads(fn, list(zip(cut, cut[1:])))


def by_heads(heads: Callable[[list[Item]], None], items: list[Item], work: int) -> None:
    """heads(items) with the items dealt out to Python threads, each calling a one-thread BLAS, when the BLAS has
    threads to spare and ``work`` (scalar operations in all) is big; else in one call.  Each item is computed by one
    thread, start to end, in the same order: the same numbers either way (attention's heads, forward and backward)."""
    n = workers(len(items), work)
    if n == 1:
        heads(items)
        return
    with single_threaded():
        on_threads(heads, [items[i::n] for i in range(n)])


def both(first: Callable[[], R], second: Callable[[], R], work: int) -> tuple[R, R]:
    """first() and second(), two independent products of ``work`` scalar operations in all: at once, each on its own
    thread calling a one-thread BLAS, when the BLAS is OpenBLAS with two threads or more and the work is big; else in
    turn.  Each product is computed by one thread start to end: the numbers of a one-thread BLAS.  (OpenBLAS splits
    a product between its threads by rows and columns of the result; for some lengths of the sum it also blocks the
    sum differently, so a last bit can differ from a two-thread product, as it differs between machines with other
    core counts.  On the shipped specs and the GPT-2-sized block every gradient is the same to the bit.)"""
    if workers(2, work) < 2:
        return first(), second()
    with single_threaded():
        a, b = on_threads(lambda f: f(), [first, second])
    return a, b

