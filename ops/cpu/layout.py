"""Array layout helpers for the kernels' Python wrappers (plain NumPy: nothing here is compiled)."""
import math

import numpy as np


def rows(a):
    """a as a C-contiguous (R, T) array of its rows along the last axis (a view when a is contiguous)."""
    a = np.asarray(a)
    return np.ascontiguousarray(a).reshape(math.prod(a.shape[:-1]), a.shape[-1])
