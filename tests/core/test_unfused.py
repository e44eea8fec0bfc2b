"""Fused primitives agree with their unfused compositions, in value and gradient."""
import numpy as np
import pytest

import attngraph as ag
from attngraph.core import unfused

MASK = np.array([[True, False, True, True, False], [False] * 5, [True] * 5])
PAIRS = {
    "softmax": (lambda x: ag.softmax(x), lambda x: unfused.softmax(x)),
    "softmax_masked": (lambda x: ag.softmax(x, mask=MASK), lambda x: unfused.softmax(x, mask=MASK)),
    "log_softmax": (lambda x: ag.log_softmax(x, axis=0), lambda x: unfused.log_softmax(x, axis=0)),
    "layer_norm": (lambda x: ag.layer_norm(x, x[0] * 0 + 2.0, x[1]),
                   lambda x: unfused.layer_norm(x, x[0] * 0 + 2.0, x[1])),
    "cross_entropy": (lambda x: ag.cross_entropy(x, np.array([4, 1, -1]), ignore_index=-1),
                      lambda x: unfused.cross_entropy(x, np.array([4, 1, -1]), ignore_index=-1)),
}


@pytest.mark.parametrize("name", PAIRS)
def test_fused_equals_unfused(name, rng):
    fused, composed = PAIRS[name]
    x = rng.standard_normal((3, 5)) * 3
    weights = rng.standard_normal((3, 5))

    def weighted(f):
        return lambda x: ag.sum(f(x) * (weights if name != "cross_entropy" else 1.0))

    value_f, grad_f = ag.value_and_grad(weighted(fused))(x)
    value_c, grad_c = ag.value_and_grad(weighted(composed))(x)
    np.testing.assert_allclose(value_f, value_c, rtol=1e-12)
    np.testing.assert_allclose(grad_f, grad_c, rtol=1e-10, atol=1e-12)
