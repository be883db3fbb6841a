"""tracer: a shape-and-value tracer for Transformer blocks."""

__version__ = "0.1.0"
