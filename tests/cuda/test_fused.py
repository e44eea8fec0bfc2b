"""The fused elementwise kernels on CUDA against the CPU's: the same programs (the one scalar definition), read
through broadcast strides, in every dtype kind, the 0-d case and a GRU update with its gradient."""
import numpy as np
import pytest

import attngraph as ag
from attngraph.core import passes
from tests.core.test_fuse_elementwise import fused_nodes, gru_update
from tests.cuda.test_executor import assert_same_on_both


def test_a_gru_update_and_its_gradient(rng):
    b = ag.Parameter(rng.standard_normal(12).astype(np.float32), name="b")
    graph = ag.trace(lambda x, h: ag.sum(gru_update(x, h, b)), x=ag.Input(("B", 12)), h=ag.Input(("B", 12)))
    gradient = graph.grad(wrt=["x", "h", "b"])
    assert len(fused_nodes(passes.optimize(gradient))) >= 3
    assert_same_on_both(gradient, x=rng.standard_normal((3, 12)).astype(np.float32),
                        h=rng.standard_normal((3, 12)).astype(np.float32))


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")     # the simulator's NumPy int32 wraps
def test_broadcast_integer_boolean_and_scalar_programs(rng):
    def f(x, bias, a, b):
        wrapped = a * b + a
        keep = ag.logical_and(wrapped > 0, ag.logical_not(ag.equal(a, b)))
        return (ag.relu((x + bias) * 0.5 + 2.0), wrapped, ag.where(keep, wrapped, -wrapped).astype(np.float32) * 0.5,
                ag.sum(x) * 2.0 + 1.0)
    feeds = dict(x=rng.standard_normal((2, 3, 4)).astype(np.float32), bias=rng.standard_normal(4).astype(np.float32),
                 a=np.array([2 ** 30, -7, 5], np.int32), b=np.array([4, 3, 5], np.int32))
    graph = ag.trace(f, **feeds)
    assert len(fused_nodes(passes.optimize(graph))) == 4
    assert_same_on_both(graph, **feeds)
