"""The Python API behind ``tracer.load``, ``tracer.trace``, ``tracer.diff`` and ``tracer.recorder`` (see docs/api.md).

One module per capability: loading (a spec from a path, YAML text or a dict), trace (the Trace a
notebook holds), diffing (two sides of any kind), recorder (your own arrays into an .npz),
display (the terminal's tables as HTML for Jupyter).  Errors are tracer's own (TracerError and its
kin, with the CLI's messages); nothing here exits.
"""
