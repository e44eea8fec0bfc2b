"""The CPU executor leaves a slice a view where every reader of it takes strided views (ops/backend.py)."""
import numpy as np

import attngraph as ag
from ops.cpu.backend import BACKEND


def getitem_kernels(step):
    return [s.kernel for node, s in zip(step._nodes, step._steps) if node.op == "getitem"]


def test_a_column_slice_that_only_a_product_reads_stays_a_view(rng):
    x, w = rng.standard_normal((6, 9)).astype(np.float32), rng.standard_normal((4, 5)).astype(np.float32)
    step = ag.trace(lambda x, w: x[:, 1:5] @ w, x=x, w=w).compile()
    assert getitem_kernels(step) == [BACKEND.views["getitem"]]
    assert np.array_equal(step(x=x, w=w), np.ascontiguousarray(x[:, 1:5]) @ w)


def test_a_slice_that_a_product_and_a_sum_read_or_that_is_returned_is_copied(rng):
    x, w = rng.standard_normal((6, 9)).astype(np.float32), rng.standard_normal((4, 5)).astype(np.float32)
    step = ag.trace(lambda x, w: (x[:, 1:5] @ w + ag.sum(x[:, 1:5]), x[:, 3:7]), x=x, w=w).compile()
    assert getitem_kernels(step) == [BACKEND.kernels["getitem"]] * 2
    product, sliced = step(x=x, w=w)
    assert np.allclose(product, x[:, 1:5] @ w + x[:, 1:5].sum(), rtol=1e-5)
    assert np.array_equal(sliced, x[:, 3:7]) and sliced.flags.c_contiguous and not np.shares_memory(sliced, x)
