"""Integer position tensors read from other tensors' (possibly symbolic) lengths when the graph runs:
``arange`` for position embeddings, ``relative_distance`` for relative-position attention."""
import numpy as np

from ..primitive import define


def _positions(length: int, dtype=np.int64) -> np.ndarray:
    return np.arange(length, dtype=dtype)


def relative_distance(q, k, max_distance):
    """clip(j − i, −k, k) + k for query i and key j: an index into 2k + 1 relative-position embeddings."""
    return np.clip(_positions(k.shape[-2])[None, :] - _positions(q.shape[-2])[:, None],
                   -max_distance, max_distance) + max_distance


define("arange", lambda x, axis: ((x.shape[axis],), np.dtype(np.int64)), differentiable=False,
       cpu=lambda x, axis: _positions(x.shape[axis]))
define("relative_distance", lambda q, k, max_distance: ((q.shape[-2], k.shape[-2]), np.dtype(np.int64)),
       differentiable=False, cpu=relative_distance)
