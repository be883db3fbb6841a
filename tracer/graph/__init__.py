"""`tracer graph`: the block drawn from its step list, as Figure 17.1 does.  No NumPy.
"""
