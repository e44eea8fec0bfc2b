"""Data movement on every device against NumPy's indexing, exact: reshape, transpose, broadcast, slicing and the
scatter that is its gradient, concatenation."""
import numpy as np
import pytest

from tests.conftest import on_device

INDICES = [(slice(1, None), slice(None, None, 2), -1), (None, 1, slice(None, None, -2)), (0,),
           (slice(None), slice(4, 1, -1), None, slice(None))]


def test_reshape(device, rng):
    x = rng.standard_normal((2, 3, 4))
    y = on_device(device, "reshape", x, shape=(4, 6))
    assert y.shape == (4, 6)
    np.testing.assert_array_equal(y, x.reshape(4, 6))


@pytest.mark.parametrize("perm", [(2, 0, 1), (1, 0, 2), (0, 1, 2)])
def test_transpose(perm, device, rng):
    x = rng.standard_normal((2, 3, 5))
    np.testing.assert_array_equal(on_device(device, "transpose", x, perm=perm), x.transpose(perm))


@pytest.mark.parametrize("shapes", [((3, 1), (2, 3, 4)), ((), (2, 2)), ((4,), (3, 4))], ids=str)
def test_broadcast_to(shapes, device, rng):
    source, target = shapes
    x = rng.standard_normal(source)
    np.testing.assert_array_equal(on_device(device, "broadcast_to", x, shape=target), np.broadcast_to(x, target))


@pytest.mark.parametrize("index", INDICES, ids=str)
def test_getitem_and_its_scatter(index, device, rng):
    x = rng.standard_normal((3, 5, 2))
    got = on_device(device, "getitem", x, index=index)
    np.testing.assert_array_equal(got, x[index])
    scattered = np.zeros_like(x)
    scattered[index] = x[index]
    np.testing.assert_array_equal(on_device(device, "scatter_slice", got, shape=x.shape, index=index), scattered)


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_concat(axis, device, rng):
    xs = [rng.standard_normal(tuple(n if a == axis else (2, 3, 4)[a] for a in range(3))) for n in (1, 3, 2)]
    np.testing.assert_array_equal(on_device(device, "concat", *xs, axis=axis), np.concatenate(xs, axis))
