"""Dropout with the counter-based random mask of ops/cpu/dropout.py: for the same (seed, key) the CPU and
the GPU drop the same elements.

  u_i = (h_i >> 11) / 2**53 in [0, 1),  h_i = mix(mix(mix(seed) + key) + (i + 1) * GAMMA)
  dropout(x)_i = x_i / (1 - p) where u_i >= p, else 0

The hash is the CPU's own ``_mix`` (splitmix64's finalizer), which numba compiles for the GPU; the simulator
runs its CPU build (machine integers wrap silently there). A thread per element. The seed may be a device
array (the graph's ``rng_seed`` input): the kernel reads it, so nothing is copied back to the host.
"""
import math

import numpy as np
from numba import njit

from ops._cuda import cuda, empty, is_device_array, to_device
from ops.cpu import dropout as cpu
from ops.cuda.elementwise import astype
from ops.cuda.launch import THREADS, blocks
from ops.cuda.layout import flat


def dropout(x, p, seed, key):
    """x with each element zeroed with probability p and the rest scaled by 1 / (1 - p); ``seed`` is an int or
    a device array holding one."""
    if not 0 <= p < 1:
        raise ValueError(f"dropout probability must be in [0, 1), got {p}")
    if p == 0:
        return astype(x, x.dtype)
    seed = seed if is_device_array(seed) else to_device(np.asarray(int(seed) % 2 ** 64, np.uint64))
    key, threshold = (np.uint64(int(v) % 2 ** 64) for v in (key, math.ceil(p * 2 ** 53)))
    out = empty(x.shape, x.dtype)
    _dropout_flat[blocks(out.size), THREADS](flat(out), flat(x), flat(seed), key, threshold,
                                             x.dtype.type(1 / (1 - p)))
    return out


@njit
def _keep(seed, key, i, threshold):
    """Whether element i survives: the test (h_i >> 11) >= ceil(p 2**53) that ops/cpu/dropout.py writes inline
    in its loop. The stream's start is recomputed for each element (a few integer operations) instead of being
    passed in: the simulator calls this compiled function from Python, where a uint64 it returned would come
    back as an int of another type."""
    stream = cpu._mix(cpu._mix(np.uint64(seed)) + np.uint64(key))
    return cpu._mix(stream + np.uint64(i + 1) * cpu._GAMMA) >> cpu._S11 >= np.uint64(threshold)


@cuda.jit
def _dropout_flat(out, x, seed, key, threshold, scale):
    for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        out[i] = x[i] * scale if _keep(seed[0], key, i, threshold) else x.dtype.type(0)


KERNELS = {"dropout": lambda x, seed, p, key: dropout(x, p, seed, key)}
