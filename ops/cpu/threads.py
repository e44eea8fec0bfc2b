"""Which threading layer Numba's parallel kernels really use (it is chosen on the first parallel call)."""
import numba
import numpy as np
from numba import njit, prange


@njit(parallel=True, cache=True)
def _touch(x):
    for i in prange(x.size):
        x[i] += 1.0


def threading_info() -> tuple[str, int]:
    """(layer, threads): runs one tiny parallel kernel so that the layer is loaded, then asks Numba."""
    _touch(np.zeros(4))
    return numba.threading_layer(), numba.get_num_threads()
