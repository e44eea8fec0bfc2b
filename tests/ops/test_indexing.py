"""Advanced indexing, ``x[...]`` with integer arrays or tensors on several axes, on every device against NumPy's own
indexing (broadcast index arrays; the broadcast shape in place of adjacent indexed axes, first when they are
separated by a slice, None or an int), its gradient (scatter-add: repeated indices accumulate), bounds errors
naming the axis; and the eager ops whose shape depends on the data, masked_select and nonzero, refused in graphs."""
import numpy as np
import pytest

import attngraph as ag
from attngraph.errors import BindingError, DTypeError, ShapeError, TracingError
from attngraph.inspect.gradcheck import gradcheck
from tests.conftest import run, value_and_grad_on

ROWS, COLS = np.array([[0, 2], [1, 1]]), np.array([3, -1])
KEYS = {
    "two_adjacent": (ROWS % 2, ROWS),
    "adjacent_after_a_slice": (slice(None), ROWS % 2, COLS),
    "separated_by_a_slice": (ROWS % 2, slice(None), COLS),
    "an_int_separates": (0, slice(None), COLS),
    "an_int_beside": (slice(None), 0, COLS),
    "none_separates": (ROWS % 2, None, ROWS),
    "ellipsis_and_step": (Ellipsis, slice(None, None, -2), [1, 0, 1]),
    "three_arrays": ([1, 0, 1], [[0], [2]], [3, 3, 0]),
    "one_array_with_slices": (slice(1, None), [2, 0, 2]),
    "empty_list": ([], slice(None)),
}
COVERS = {"Tensor"}      # x[...], the Tensor's indexing


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
@pytest.mark.parametrize("name", KEYS)
def test_constant_index_arrays_index_as_numpy(name, dtype, device):
    x = np.arange(24).reshape(2, 3, 4).astype(dtype)
    got, want = run(lambda t: t[KEYS[name]], x, device=device), x[KEYS[name]]
    assert got.shape == want.shape and got.dtype == dtype
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("name", ["two_adjacent", "separated_by_a_slice", "three_arrays"])
def test_index_tensors_index_as_numpy_and_repeated_indices_accumulate_gradients(name, device):
    key = KEYS[name]
    x = np.random.default_rng(0).standard_normal((2, 3, 4))
    arrays = [np.asarray(k) for k in key if not isinstance(k, slice)]

    def fn(t, *indices):
        it = iter(indices)
        return t[tuple(k if isinstance(k, slice) else next(it) for k in key)]
    np.testing.assert_array_equal(run(fn, x, *arrays, device=device), x[key])
    weights = np.random.default_rng(1).standard_normal(x[key].shape)
    _, (grad, *_) = value_and_grad_on(device, lambda t, *i: ag.sum(fn(t, *i) * weights), x, *arrays)
    want = np.zeros_like(x)
    np.add.at(want, key, weights)
    np.testing.assert_allclose(grad, want, rtol=1e-14)


def test_gradients_pass_gradcheck_in_float64():
    weights = np.linspace(-1, 1, 8).reshape(2, 2, 2)
    gradcheck(lambda t: ag.sum(t[KEYS["separated_by_a_slice"]][..., :2] * weights),
              np.random.default_rng(0).standard_normal((2, 3, 4))).raise_if_failed()


def test_out_of_range_indices_name_the_axis():
    with pytest.raises(ShapeError, match="index 3 is out of bounds for axis 1 with size 3"):
        ag.trace(lambda x: x[[0, 1], [1, 3]], x=ag.Input((2, 3, 4)))
    with pytest.raises(ShapeError, match="index -5 is out of bounds for axis 2 with size 4"):
        ag.trace(lambda x: x[:, None, [0], [-5]], x=ag.Input((2, 3, 4)))
    with pytest.raises(DTypeError, match="where"):
        ag.trace(lambda x: x[[True, False], [0, 1]], x=ag.Input((2, 3)))


def test_a_fed_index_out_of_range_is_a_binding_error_naming_the_axis(device):
    graph = ag.trace(lambda x, i, j: x[i, j], x=ag.Input((2, 3)), i=ag.Input((2,), "int64"), j=ag.Input((2,), "int64"))
    run_graph = graph.compile(device.name)
    np.testing.assert_array_equal(run_graph(x=np.arange(6.0, dtype=np.float32).reshape(2, 3), i=np.array([1, -2]),
                                            j=np.array([-1, 0])), [5.0, 0.0])
    with pytest.raises(BindingError, match="index of axis 1"):
        run_graph(x=np.zeros((2, 3), np.float32), i=np.array([0, 1]), j=np.array([0, 3]))


def test_masked_select_and_nonzero_are_eager_as_torch():
    x = np.array([[1.0, 0.0, 3.0], [0.0, 5.0, 0.0]])
    np.testing.assert_array_equal(ag.masked_select(x, np.array([True, False, True])), [1.0, 3.0, 0.0, 0.0])
    np.testing.assert_array_equal(ag.nonzero(x), [[0, 0], [0, 2], [1, 1]])
    rows, cols = ag.nonzero(x, as_tuple=True)
    assert rows.tolist() == [0, 0, 1] and cols.tolist() == [0, 2, 1] and rows.dtype == np.int64
    assert ag.nonzero(np.array(5.0)).shape == (1, 0) and ag.nonzero(np.array(5.0), as_tuple=True)[0].tolist() == [0]
    with pytest.raises(DTypeError, match="bool"):
        ag.masked_select(x, np.ones(3))


@pytest.mark.parametrize("op", [lambda x: ag.nonzero(x), lambda x: ag.masked_select(x, x > 0)])
def test_masked_select_and_nonzero_of_a_traced_tensor_say_why_and_what_to_use(op):
    with pytest.raises(TracingError, match="depends on the data.*ag.where"):
        ag.trace(op, x=ag.Input((2, 3)))
