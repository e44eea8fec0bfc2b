"""Integer position tensors read from other tensors' (possibly symbolic) lengths when the graph runs:
``arange`` for position embeddings, ``relative_distance`` for relative-position attention (clip(j − i, −k, k) + k
for query i and key j: an index into 2k + 1 relative-position embeddings)."""
import numpy as np

from ..primitive import define

define("arange", lambda x, axis: ((x.shape[axis],), np.dtype(np.int64)), differentiable=False, shape_only=True)
define("relative_distance", lambda q, k, max_distance: ((q.shape[-2], k.shape[-2]), np.dtype(np.int64)),
       differentiable=False, shape_only=True)
