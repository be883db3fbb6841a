"""The front door, below every feature: ``prepare`` (one way to load and check a spec, for every command and the
library), and the public results a notebook holds, ``Trace`` (tracer.trace) and ``Diff`` (tracer.diff), each with
its views defined where the type is (the table, JSON, the page)."""
