"""Data movement on the device against NumPy (the CPU primitives' kernels are NumPy copies)."""
import numpy as np
import pytest

from ops.cuda import movement
from tests.cuda.conftest import host, on_device

INDICES = [(slice(1, None), slice(None, None, 2), -1), (None, 1, slice(None, None, -2)), (0,),
           (slice(None), slice(4, 1, -1), None, slice(None))]


def test_reshape_is_a_view(rng):
    x = on_device(rng.standard_normal((2, 3, 4)))
    y = movement.reshape(x, (4, 6))
    assert y.shape == (4, 6)
    np.testing.assert_array_equal(host(y), host(x).reshape(4, 6))


@pytest.mark.parametrize("perm", [(2, 0, 1), (1, 0, 2), (0, 1, 2)])
def test_transpose(perm, rng):
    x = rng.standard_normal((2, 3, 5))
    np.testing.assert_array_equal(host(movement.transpose(on_device(x), perm)), x.transpose(perm))


@pytest.mark.parametrize("shapes", [((3, 1), (2, 3, 4)), ((), (2, 2)), ((4,), (3, 4))], ids=str)
def test_broadcast_to(shapes, rng):
    source, target = shapes
    x = rng.standard_normal(source)
    np.testing.assert_array_equal(host(movement.broadcast_to(on_device(x), target)), np.broadcast_to(x, target))


@pytest.mark.parametrize("index", INDICES, ids=str)
def test_getitem_and_its_scatter(index, rng):
    x = rng.standard_normal((3, 5, 2))
    got = host(movement.getitem(on_device(x), index))
    np.testing.assert_array_equal(got, x[index])
    scattered = np.zeros_like(x)
    scattered[index] = got
    np.testing.assert_array_equal(host(movement.scatter_slice(on_device(got), x.shape, index)), scattered)


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_concat(axis, rng):
    xs = [rng.standard_normal(tuple(n if a == axis else (2, 3, 4)[a] for a in range(3))) for n in (1, 3, 2)]
    np.testing.assert_array_equal(host(movement.concat(*on_device(*xs), axis=axis)), np.concatenate(xs, axis))
