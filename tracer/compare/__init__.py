"""`tracer diff` and ``tracer.diff``: two sides (specs, saved traces, a student's own arrays) compared stage by stage,
with the hints that name a mistake, and every view of the result.
"""
