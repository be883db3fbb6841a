"""`tracer check`: is a hand-worked answer right, to the printed precision?
"""
