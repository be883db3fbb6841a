"""T5's relative positions: each (query i, key j) pair falls in a bucket of j - i, and the bucket's row of a learned
table [K_rel,H] is added to every head's score (tracer's op ``relative_bias``; Raffel et al. 2020, section 2.1).

The bucketing is Hugging Face's ``T5Attention._relative_position_bucket``: half of the buckets (each side's half in a
bidirectional stack) hold the distances 0 .. max_exact - 1 one by one, the rest hold logarithmically wider ranges
up to ``max_distance``, beyond which every distance shares the last bucket.  Its logarithm is computed in float32,
as Hugging Face computes it (``relative_position.float()``): every float operation here is rounded to float32, so
that the integer buckets are Hugging Face's even where a float64 logarithm would cross an integer.  Plain Python
(the preflight, the scalar reference and the kernel's tests call it), no NumPy.
"""

from __future__ import annotations

import math
import struct

DEFAULT_BUCKETS, DEFAULT_MAX_DISTANCE = 32, 128  # T5Config's relative_attention_num_buckets, relative_attention_max_distance


def f32(x: float) -> float:
    """x rounded to the nearest float32 (as a Python float)."""
    return float(struct.unpack("f", struct.pack("f", x))[0])


def bucket(relative: int, bidirectional: bool, buckets: int, max_distance: int) -> int:
    """The bucket of the distance ``relative`` = key position - query position."""
    n, out = buckets, 0
    if bidirectional:  # keys after the query get the upper half of the buckets
        n //= 2
        out += n if relative > 0 else 0
        relative = abs(relative)
    else:  # a causal stack: only keys at or before the query; a later key counts as distance 0
        relative = -min(relative, 0)
    max_exact = n // 2
    if relative < max_exact:
        return out + relative
    ratio = f32(f32(float(relative)) / max_exact)
    scaled = f32(f32(f32(math.log(ratio)) / f32(math.log(max_distance / max_exact))) * (n - max_exact))
    return out + min(max_exact + int(scaled), n - 1)


def largest_bucket(n_q: int, n_k: int, bidirectional: bool, buckets: int, max_distance: int) -> int:
    """The largest bucket any pair of n_q queries and n_k keys falls in: the buckets grow with the distance on each
    side, so the farthest key after the first query and the farthest before the last query are the candidates."""
    return max(bucket(r, bidirectional, buckets, max_distance) for r in (0, n_k - 1, -(n_q - 1)))
