"""The backward pass: a scalar loss, and its gradient with respect to every recorded stage and every weight.

- ``losses``: next-token cross-entropy and 0.5·ΣY², each with its gradient (the seed of the backward pass);
- ``backward``: walks the spec's step list in reverse, one backward function per op (the kernels'
  ``*_backward``), and records each stage's gradient as the executor records its value;
- ``run``: ``tracer grad``: load, check the memory, run forward and backward, per-layer norms;
- ``verify``: central finite differences on a sample of every weight's coordinates (``--verify``);
- ``exact``: causality proved with the backward pass (``tracer probe --exact``);
- ``view``: the table, the weights view and the per-layer picture (rich renderables and text formats).
"""
