"""`tracer attribute`: direct logit attribution (core.py the split, view.py its views) and attribution patching (estimate.py)."""
