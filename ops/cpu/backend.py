"""The CPU Backend: the kernels of this package's modules, on NumPy arrays."""
from types import MappingProxyType

import numpy as np

import ops.cpu
from ops.backend import Backend, kernel_table
from ops.cpu.movement import VIEWS
from ops.cpu.threads import together


def _host(a) -> np.ndarray:
    """``a`` as a NumPy array: a device array (anything with ``copy_to_host``) is copied back."""
    return a.copy_to_host() if hasattr(a, "copy_to_host") else np.asarray(a)


BACKEND = Backend("cpu", kernel_table(ops.cpu), put=_host, get=_host, owns=lambda a: isinstance(a, np.ndarray),
                  zeros_like=np.zeros_like, views=MappingProxyType(VIEWS),
                  reads_views=frozenset({"concat", "scatter_slice", "matmul", "sum"}),   # ops/cpu/matmul.py, reduce.py
                  costless=frozenset({"reshape"}), concurrent=frozenset({"scan"}), together=together)
