"""The block description: ops (one record each), steps and layer templates, the kernels' axis contracts on shapes,
and the stage catalogue.  No NumPy.
"""
