"""Integer tensors read from other arrays' lengths when a graph runs: positions, relative distances, sizes."""
from math import prod

import numpy as np


def relative_distance(q, k, max_distance):
    """clip(j − i, −k, k) + k for query i and key j: an index into 2k + 1 relative-position embeddings."""
    i, j = np.arange(q.shape[-2], dtype=np.int64)[:, None], np.arange(k.shape[-2], dtype=np.int64)[None, :]
    return np.clip(j - i, -max_distance, max_distance) + max_distance


KERNELS = {
    "arange": lambda x, axis: np.arange(x.shape[axis], dtype=np.int64),
    "relative_distance": relative_distance,
    "size": lambda x, axes, dtype: np.asarray(prod(x.shape[a] for a in axes), dtype=dtype),
}
