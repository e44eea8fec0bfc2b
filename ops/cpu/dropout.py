"""Dropout with a counter-based random mask: recomputed from (seed, key, position), never stored.

  u_i = (h_i >> 11) / 2**53 in [0, 1),  h_i = mix(mix(mix(seed) + key) + (i + 1) * GAMMA)
  dropout(x)_i = x_i / (1 - p) where u_i >= p, else 0

mix is splitmix64's finalizer and GAMMA its increment, so for a given (seed, key) the h_i are the
outputs of a splitmix64 stream; a different key starts an unrelated stream. i is the flat C-order
position. The backward is the same function applied to the output gradient with the same (seed, key):
dx = dropout(g, p, seed, key).
"""
import math

import numpy as np
from numba import njit, prange

from ops.cpu.threads import parallel_kernel

_GAMMA = np.uint64(0x9E3779B97F4A7C15)
_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
_S11, _S27, _S30, _S31 = (np.uint64(s) for s in (11, 27, 30, 31))


def dropout(x, p, seed, key):
    """x with each element zeroed with probability p and the rest scaled by 1 / (1 - p)."""
    if not 0 <= p < 1:
        raise ValueError(f"dropout probability must be in [0, 1), got {p}")
    x = np.asarray(x)
    if p == 0:
        return np.array(x, order="C")
    seed, key, threshold = (np.uint64(int(v) % 2 ** 64) for v in (seed, key, math.ceil(p * 2 ** 53)))
    out = _dropout_flat(np.ascontiguousarray(x).reshape(-1), seed, key, threshold, x.dtype.type(1 / (1 - p)))
    return out.reshape(x.shape)


@njit(cache=True)
def _mix(z):
    """splitmix64's finalizer: a bijection of uint64 whose every output bit depends on every input bit."""
    z = (z ^ (z >> _S30)) * _M1
    z = (z ^ (z >> _S27)) * _M2
    return z ^ (z >> _S31)


@parallel_kernel
def _dropout_flat(x, seed, key, threshold, scale):
    """x_i * scale where (h_i >> 11) >= threshold = ceil(p 2**53), else 0"""
    stream = _mix(_mix(seed) + key)
    out = np.empty_like(x)
    for i in prange(x.size):
        keep = _mix(stream + np.uint64(i + 1) * _GAMMA) >> _S11 >= threshold
        out[i] = x[i] * scale if keep else x.dtype.type(0)
    return out


KERNELS = {"dropout": lambda x, seed, p, key: dropout(x, p, int(seed), key)}
