"""Kernels of attngraph: NumPy arrays in, new NumPy arrays out; nothing here knows about graphs.

`ops.cpu` holds the Numba CPU kernels, one module per op family, forward and backward side by side.

Importing ``ops`` makes idle threads sleep rather than spin, unless the environment says otherwise:
OMP_WAIT_POLICY=passive for Numba's OpenMP threads and OPENBLAS_THREAD_TIMEOUT=4 for OpenBLAS's (why:
ops/cpu/threads.py). Set here, first, so that they reach every library loaded after: attngraph imports ``ops``
before NumPy, whose OpenBLAS reads its variables once, when NumPy is imported.
"""
import os

os.environ.setdefault("OMP_WAIT_POLICY", "passive")
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")
