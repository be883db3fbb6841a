"""The NumPy layer: weights (params), kernels and their backward, the executor that records every stage, and the
scalar reference that cross-checks it.
"""
