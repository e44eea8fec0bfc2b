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


def test_a_slice_that_a_product_and_a_softmax_read_or_that_is_returned_is_copied(rng):
    x, w = rng.standard_normal((6, 9)).astype(np.float32), rng.standard_normal((4, 5)).astype(np.float32)
    step = ag.trace(lambda x, w: (x[:, 1:5] @ w + ag.softmax(x[:, 1:5]) @ w, x[:, 3:7]), x=x, w=w).compile()
    assert getitem_kernels(step) == [BACKEND.kernels["getitem"]] * 2
    product, sliced = step(x=x, w=w)
    e = np.exp(x[:, 1:5] - x[:, 1:5].max(1, keepdims=True))
    assert np.allclose(product, x[:, 1:5] @ w + e / e.sum(1, keepdims=True) @ w, rtol=1e-5)
    assert np.array_equal(sliced, x[:, 3:7]) and sliced.flags.c_contiguous and not np.shares_memory(sliced, x)


def test_a_slice_that_a_product_and_a_sum_read_stays_a_view_and_sums_as_its_copy(rng):
    x, w = rng.standard_normal((300, 40)).astype(np.float32), rng.standard_normal((16, 5)).astype(np.float32)
    step = ag.trace(lambda x, w: (x[:, 3:19] @ w, ag.sum(x[:, 3:19], axis=0)), x=x, w=w).compile()
    assert getitem_kernels(step) == [BACKEND.views["getitem"]]
    product, total = step(x=x, w=w)
    assert np.array_equal(product, np.ascontiguousarray(x[:, 3:19]) @ w)
    copy = x[:, 3:19].copy()
    assert np.array_equal(total, ag.trace(lambda c: ag.sum(c, axis=0), c=copy).compile()(c=copy))


def test_a_reshaped_slice_that_a_sum_reads_is_a_view_of_a_view(rng):
    """(B·T, W) columns reshaped to (B, T, H, D) and summed over T, as the gradient of a scan's batched constant."""
    x = rng.standard_normal((6 * 5, 50)).astype(np.float32)
    step = ag.trace(lambda x: ag.sum(ag.reshape(x[:, 4:28], (6, 5, 4, 6)), axis=1), x=x).compile()
    assert getitem_kernels(step) == [BACKEND.views["getitem"]]
    copy = np.ascontiguousarray(x[:, 4:28]).reshape(6, 5, 4, 6)
    assert np.array_equal(step(x=x), ag.trace(lambda c: ag.sum(c, axis=1), c=copy).compile()(c=copy))
