"""`tracer probe`: causality and permutation equivariance, checked empirically (and proved with the backward
pass, --exact).
"""
