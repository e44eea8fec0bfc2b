"""argmax, argmin, argsort (sort, topk) and cumsum on "cuda": the kernels against their CPU twins, NaN, ties and
integer dtypes included, and a graph using them forward and backward against the same graph on "cpu"."""
import numpy as np
import pytest

import attngraph as ag
from ops.cpu import scan as cpu_scan
from ops.cpu import sort as cpu_sort
from ops.cuda import scan as cuda_scan
from ops.cuda import sort as cuda_sort
from tests.cuda.conftest import host, on_device
from tests.cuda.test_executor import assert_same_on_both

X = np.array([[3.0, np.nan, 1.0, 3.0, np.nan], [-np.inf, 1.0, -0.0, 0.0, np.inf]], np.float32)
TIES = np.array([[2, 0, 2, 1, 0], [1, 1, 1, 1, 1]], np.int32)


@pytest.mark.parametrize("x", [X, TIES, TIES > 0], ids=["nan", "ties", "bool"])
def test_order_kernels_match_the_cpu(x):
    for largest in (True, False):
        np.testing.assert_array_equal(host(cuda_sort.arg_extreme(on_device(x), largest)),
                                      cpu_sort.arg_extreme(x, largest))
    for k, descending in ((None, False), (None, True), (2, True), (0, False)):
        got = host(cuda_sort.argsort(on_device(x), k, descending))
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got, cpu_sort.argsort(x, k, descending))


@pytest.mark.parametrize("x", [X[:1], TIES, TIES > 0], ids=["nan", "ties", "bool"])
def test_cumsum_kernel_matches_the_cpu(x):
    for reverse in (False, True):
        got, want = host(cuda_scan.cumsum(on_device(x), reverse)), cpu_scan.cumsum(x, reverse)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


def test_a_graph_of_the_order_ops_runs_forward_and_backward_as_on_the_cpu(rng):
    def f(x, w):
        top, at = ag.topk(x, 2)
        return ag.sum(top * w) + ag.sum(ag.cumsum(ag.sort(x, 0, descending=True)[0], 1) * x) + \
            ag.sum((ag.argmax(x, 1) - ag.argmin(x, 0)[:2]).astype(x.dtype)) + ag.sum(at.astype(x.dtype))

    graph = ag.trace(f, x=ag.Input((2, 3)), w=ag.Input((2, 2)))
    x, w = rng.standard_normal((2, 3)).astype(np.float32), rng.standard_normal((2, 2)).astype(np.float32)
    assert_same_on_both(graph.grad(wrt=["x", "w"]), x=x, w=w)
