"""`tracer patch`: activation patching, a sweep over stages x positions (run.py the sweep, view.py its views)."""
