"""The environment the test suite runs in: Numba's threading layer is the configured one.

Without GNU OpenMP, numba silently falls back to the slow `workqueue` layer (which also aborts
the process when two Python threads run parallel code). The Makefile pins the layer through
NUMBA_THREADING_LAYER; this checks that the pinned layer is the one really in use.
"""

import os

import numpy as np
from numba import njit, prange, threading_layer

# NUMBA_THREADING_LAYER may also name a selection policy instead of a layer.
_POLICIES = {
    "default": {"omp", "tbb", "workqueue"},
    "safe": {"tbb"},
    "threadsafe": {"omp", "tbb"},
    "forksafe": {"omp", "tbb"},
}


@njit(parallel=True)
def _parallel_sum(a):
    total = 0.0
    for i in prange(a.shape[0]):
        total += a[i]
    return total


def test_configured_threading_layer_is_in_use():
    assert _parallel_sum(np.arange(1000, dtype=np.float64)) == 499500.0
    configured = os.environ.get("NUMBA_THREADING_LAYER", "omp")
    expected = _POLICIES.get(configured, {configured})
    assert threading_layer() in expected, (
        f"numba runs parallel code on the {threading_layer()!r} threading layer, but "
        f"NUMBA_THREADING_LAYER={configured!r} was asked for (see the Makefile's comment)"
    )
