"""Broadcasting elementwise ops on hypothesis-generated shapes: values and gradient shapes and sums."""
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import attngraph as ag

# name: (op, NumPy op, elementwise partial derivatives (d/da, d/db))
OPS = {"add": (ag.add, np.add, lambda a, b: (1.0, 1.0)),
       "sub": (ag.sub, np.subtract, lambda a, b: (1.0, -1.0)),
       "mul": (ag.mul, np.multiply, lambda a, b: (b, a)),
       "div": (ag.div, np.divide, lambda a, b: (1 / b, -a / b ** 2)),
       "maximum": (ag.maximum, np.maximum, lambda a, b: ((a > b) + 0.5 * (a == b), (b > a) + 0.5 * (a == b)))}


def sum_to(x, shape):
    """Sum a broadcast array back to ``shape``."""
    x = x.sum(axis=tuple(range(x.ndim - len(shape))))
    return x.sum(axis=tuple(i for i, d in enumerate(shape) if d == 1), keepdims=True).reshape(shape)


@st.composite
def broadcast_pair(draw):
    shapes = draw(hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=4, max_side=4))
    a, b = (draw(hnp.arrays(np.float64, s, elements=st.floats(0.5, 2.0))) for s in shapes.input_shapes)
    return draw(st.sampled_from(sorted(OPS))), a, b


@settings(max_examples=60, deadline=None)
@given(broadcast_pair())
def test_elementwise_broadcasting_matches_numpy_and_gradients_sum_back(case):
    name, a, b = case
    op, reference, partials = OPS[name]
    graph = ag.trace(lambda a, b: op(a, b), a=a, b=b)
    np.testing.assert_allclose(graph.compile()(a=a, b=b), reference(a, b), rtol=1e-12)
    _, (ga, gb) = ag.value_and_grad(lambda a, b: ag.sum(op(a, b)), argnums=(0, 1))(a, b)
    shape = np.broadcast_shapes(a.shape, b.shape)
    da, db = (np.broadcast_to(d, shape) for d in partials(*np.broadcast_arrays(a, b)))
    np.testing.assert_allclose(ga, sum_to(da, a.shape), rtol=1e-12)
    np.testing.assert_allclose(gb, sum_to(db, b.shape), rtol=1e-12)
