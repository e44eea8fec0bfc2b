"""Kernels of attngraph: NumPy arrays in, new NumPy arrays out; nothing here knows about graphs.

`ops.cpu` holds the Numba CPU kernels, one module per op family, forward and backward side by side.
"""
