"""gather and scatter_add on every device against NumPy indexing and np.add.at (repeated indices summed, on the
GPU through atomics); an index out of range raises, naming it. ag.embedding's padding_idx as torch's: the row is
looked up but gets no gradient, a negative one counts from the end, one outside the table is refused. take (a gather
of rows), flip and pad's take-based modes of size-0 inputs and indices as NumPy's."""
import re

import numpy as np
import pytest

import attngraph as ag

INDICES = [np.array([[1, 2, 9], [0, 0, 4]]), np.array(3), np.zeros(0, np.int64),
           np.array([5, 5, 5, 1], np.int32)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("idx", INDICES, ids=["2d", "0d", "empty", "repeated"])
def test_gather_and_scatter_add(idx, dtype, device, rng):
    gather, scatter_add = device.kernels["gather"], device.kernels["scatter_add"]
    table = rng.standard_normal((10, 3)).astype(dtype)
    out = device.get(gather(device.put(table), device.put(idx)))
    assert out.dtype == dtype and out.shape == idx.shape + (3,)
    np.testing.assert_array_equal(out, table[idx])
    g = rng.standard_normal(idx.shape + (3,)).astype(dtype)
    expected = np.zeros((10, 3), dtype)
    np.add.at(expected, idx, g)
    got = device.get(scatter_add(device.put(g), device.put(idx), 10))
    assert got.dtype == dtype
    np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_scatter_add_spreads_over_threads(device, rng):
    idx = rng.integers(0, 7, 50)
    g = rng.standard_normal((50, 130))
    expected = np.zeros((7, 130))
    np.add.at(expected, idx, g)
    got = device.kernels["scatter_add"](device.put(g), device.put(idx), 7)
    np.testing.assert_allclose(device.get(got), expected, rtol=1e-12)


@pytest.mark.parametrize("bad", [10, -1])
def test_an_index_out_of_range_raises_naming_it(bad, device):
    idx = device.put(np.array([[1, bad, 4], [bad, 1, 2]]))
    with pytest.raises(IndexError, match=f"index {bad} is out of range for 10 rows"):
        device.kernels["gather"](device.put(np.ones((10, 3))), idx)
    with pytest.raises(IndexError, match=f"index {bad} is out of range for 10 rows"):
        device.kernels["scatter_add"](device.put(np.ones((2, 3, 3))), idx, 10)


TABLE = np.arange(12.0).reshape(4, 3)
TOKENS = np.array([[0, 2, 1], [2, 3, 0]])
TORCH_GRAD = [[15.0, 17.0, 19.0], [6.0, 7.0, 8.0], [0.0, 0.0, 0.0], [12.0, 13.0, 14.0]]   # padding_idx=-2 (row 2)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("padding_idx", [2, -2])
@pytest.mark.parametrize("index_dtype", [np.int64, np.int32, np.uint8])
def test_padding_idx_rows_are_looked_up_but_get_no_gradient(device, dtype, padding_idx, index_dtype):
    """torch.nn.functional.embedding(tokens, table, padding_idx): the padding row's values come out (a row set by
    hand is not zeroed), its gradient is 0; torch 2.13's gradient of sum(embedding ∘ c), c = 0, 1, …, 17."""
    c = np.arange(18.0).reshape(2, 3, 3).astype(dtype)
    graph = ag.trace(lambda table, tokens: ag.sum(ag.embedding(table, tokens, padding_idx=padding_idx) * c),
                     table=TABLE.astype(dtype), tokens=TOKENS.astype(index_dtype)).grad(wrt=["table"])
    value, dtable = graph.compile(device.name)(table=TABLE.astype(dtype), tokens=TOKENS.astype(index_dtype))
    assert value.dtype == dtable.dtype == dtype
    np.testing.assert_array_equal(value, (TABLE[TOKENS] * c).sum())
    np.testing.assert_array_equal(dtable, TORCH_GRAD)
    lookup = ag.trace(lambda table, tokens: ag.embedding(table, tokens, padding_idx=padding_idx),
                      table=TABLE.astype(dtype), tokens=TOKENS.astype(index_dtype))
    rows = lookup.compile(device.name)(table=TABLE.astype(dtype), tokens=TOKENS.astype(index_dtype))
    np.testing.assert_array_equal(rows, TABLE[TOKENS])


def test_padding_idx_beyond_the_index_dtype_changes_nothing(device):
    """A padding row that uint8 indices cannot reach (row 300 of 301): every looked-up row gets its gradient."""
    table, tokens = np.ones((301, 2)), np.array([0, 255, 255], np.uint8)
    graph = ag.trace(lambda table, tokens: ag.sum(ag.embedding(table, tokens, padding_idx=300)),
                     table=table, tokens=tokens).grad(wrt=["table"])
    _, dtable = graph.compile(device.name)(table=table, tokens=tokens)
    np.testing.assert_array_equal(dtable[[0, 255, 300]], [[1, 1], [2, 2], [0, 0]])


@pytest.mark.parametrize("bad", [4, -5, 1.5, True, "0"])
def test_a_padding_idx_outside_the_table_is_refused_naming_it(bad):
    with pytest.raises(ag.ShapeError, match=r"embedding's padding_idx must be an int in \[-4, 3\] \(a row of the "
                                            rf"table\), got {re.escape(repr(bad))}"):
        ag.trace(lambda table, tokens: ag.embedding(table, tokens, padding_idx=bad), table=TABLE, tokens=TOKENS)


def test_padding_idx_exports_as_the_lookup_it_is():
    """The exported forward gives the rows looked up, the padding row's included (its gradient is no concern)."""
    pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from attngraph.export import to_onnx
    graph = ag.trace(lambda table, tokens: ag.embedding(table, tokens, padding_idx=-2), table=TABLE, tokens=TOKENS)
    session = ort.InferenceSession(to_onnx(graph).SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = {i.name: dict(table=TABLE, tokens=TOKENS)[i.name] for i in session.get_inputs()}
    np.testing.assert_array_equal(session.run(None, feeds)[0], TABLE[TOKENS])


EMPTY_TAKES = [((0, 3), np.zeros(0, np.int64), 0), ((2, 0), np.zeros(0, np.int64), 1),   # an empty axis taken
               ((3, 0), np.array([0, -1]), 0), ((3, 0, 2), np.array([[1], [0]]), 0),      # rows of nothing
               ((0, 3), np.array([2, -1], np.int32), 1), ((3, 0), np.array(1), 0),
               ((2, 3), np.zeros(0, np.int64), 1), ((2, 3), np.zeros((2, 0), np.int32), 0)]   # no indices


@pytest.mark.parametrize("shape, indices, axis", EMPTY_TAKES, ids=lambda v: str(np.shape(v)) if
                         isinstance(v, np.ndarray) else str(v).replace(" ", ""))
@pytest.mark.parametrize("fed", [False, True], ids=["constant", "fed"])
def test_take_of_size_0_inputs_and_indices_is_numpy_s(device, shape, indices, axis, fed):
    """np.take's shape (the indices' axes in place of ``axis``) when the input or the indices hold nothing, the
    indices a constant or fed when the graph runs; the gradient scatters back (zeros where nothing was taken)."""
    x = np.arange(1.0, 1 + np.prod(shape)).reshape(shape)
    c = np.arange(np.take(x, indices, axis).size, dtype=np.float64).reshape(np.take(x, indices, axis).shape) + 1
    feeds = dict(x=x, indices=indices) if fed else dict(x=x)
    graph = ag.trace(lambda x, indices=indices: ag.sum(ag.take(x, indices, axis) * c), **feeds).grad(wrt=["x"])
    value, dx = graph.compile(device.name)(**feeds)
    expected = np.zeros_like(x)
    np.add.at(np.moveaxis(expected, axis, 0), indices, np.moveaxis(c, tuple(range(axis, axis + indices.ndim)),
                                                                   tuple(range(indices.ndim))))
    assert dx.shape == x.shape and value == (np.take(x, indices, axis) * c).sum()
    np.testing.assert_array_equal(dx, expected)
    out = ag.trace(lambda x, indices=indices: ag.take(x, indices, axis), **feeds).compile(device.name)(**feeds)
    assert out.shape == np.take(x, indices, axis).shape
    np.testing.assert_array_equal(out, np.take(x, indices, axis))


def test_take_from_an_empty_axis_is_refused_naming_it(device):
    x = np.zeros((0, 3))
    with pytest.raises(ag.ShapeError, match="index 0 is out of bounds for axis 0 with size 0"):
        ag.trace(lambda x: ag.take(x, np.array([0]), 0), x=x)
    run = ag.trace(lambda x, i: ag.take(x, i, 0), x=x, i=np.array([0])).compile(device.name)
    with pytest.raises(ag.BindingError, match="index 0 is out of range for 0 rows"):
        run(x=x, i=np.array([0]))


@pytest.mark.parametrize("shape", [(0, 3), (2, 0), (2, 3, 0)], ids=str)
def test_flip_and_the_padding_modes_of_tensors_with_an_empty_axis(device, shape):
    """flip and pad's take-based modes on a tensor holding nothing: NumPy's shapes (np.pad's edge/wrap/reflect)."""
    x = np.zeros(shape)
    widths = ((0, 0),) * (len(shape) - 1) + ((1, 2),) if shape[-1] else ((1, 1),) + ((0, 0),) * (len(shape) - 1)
    flat = tuple(w for pair in reversed(widths) for w in pair)           # torch's order: the last axis first
    for mode, numpy_mode in [("replicate", "edge"), ("circular", "wrap"), ("reflect", "reflect")]:
        out = ag.trace(lambda x: ag.pad(x, flat, mode), x=x).compile(device.name)(x=x)
        assert out.shape == np.pad(x, widths, numpy_mode).shape
    assert ag.trace(lambda x: ag.flip(x, (0, -1)), x=x).compile(device.name)(x=x).shape == shape
