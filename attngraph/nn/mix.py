"""``ScalarMix``: a learned, softmax-weighted sum of a network's layers (Peters et al. 2018, ELMo)."""
from __future__ import annotations

import numpy as np

from ..core import functional as F
from ..core.parameter import Parameter
from ..errors import ShapeError
from .checks import flag, float_dtype, integer
from .module import Module


class ScalarMix(Module):
    """mixed = ScalarMix(count, layer_norm=False)(layers): ELMo's task-specific combination (equation 1),

        mixed = γ · Σ_j s_j h_j,    s = softmax(w),

    of ``count`` tensors h_0 … h_{count−1} of one shape (..., dim). ``weights`` w (count,) starts at zero
    (every s_j = 1/count) and ``gamma`` γ (1,) at one, as AllenNLP's ``ScalarMix``. With ``layer_norm`` each
    h_j is first normalized over its last axis, (h − mean) / √(var + 1e-5) with the biased variance and no
    affine parameters (the paper's appendix applies layer normalization to each layer before weighting;
    AllenNLP's variant instead normalizes over all unmasked elements of the batch)."""

    def __init__(self, count: int, layer_norm: bool = False, dtype="float32"):
        super().__init__()
        self.count, self.layer_norm = integer("count", count), flag("layer_norm", layer_norm)
        dtype = float_dtype("dtype", dtype)
        self.weights = Parameter(np.zeros(self.count, dtype))
        self.gamma = Parameter(np.ones(1, dtype))

    def forward(self, layers):
        layers = list(layers)
        if len(layers) != self.count:
            raise ShapeError(f"ScalarMix({self.count}) got {len(layers)} layers: pass one tensor per mixed layer")
        s = F.softmax(self.weights)
        if self.layer_norm:
            layers = [F.layer_norm(h) for h in layers]
        terms = [s[j] * h for j, h in enumerate(layers)]
        return self.gamma * sum(terms[1:], terms[0])

    def extra_repr(self) -> str:
        return f"{self.count}, layer_norm={self.layer_norm}"
