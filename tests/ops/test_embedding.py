"""gather and scatter_add on every device against NumPy indexing and np.add.at (repeated indices summed, on the
GPU through atomics); an index out of range raises, naming it. ag.embedding's padding_idx as torch's: the row is
looked up but gets no gradient, a negative one counts from the end, one outside the table is refused."""
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
