"""Helpers the tests share: the independent NumPy oracle (oracle.py), random cases (cases.py), the PyTorch model
(torch_model.py) and the comparisons of a trace with the oracle (tracing.py)."""
