"""softmax / log_softmax with masks and causal masking, forward and backward, on every device against NumPy."""
import numpy as np
import pytest

from ops.cpu import softmax as cpu

TOL = {np.float32: dict(rtol=2e-6, atol=1e-6), np.float64: dict(rtol=1e-12, atol=1e-13)}


def kernel(device, name, *arrays, **attrs):
    """The device's kernel ``name`` on host arrays (None passes as no mask), its result back on the host."""
    return device.get(device.kernels[name](*(None if a is None else device.put(a) for a in arrays), **attrs))


def forward(device, log, x, mask=None, causal=False):
    return kernel(device, "log_softmax" if log else "softmax", x, mask, causal=causal)


def backward(device, log, g, y, mask=None, causal=False):
    return kernel(device, "log_softmax_grad", g, y, mask, causal=causal) if log else \
        kernel(device, "softmax_grad", g, y)


def allowed(shape, mask, causal):
    ok = np.ones(shape, bool) if mask is None else np.broadcast_to(mask, shape).copy()
    if causal:
        tq, tk = shape[-2:]
        ok &= np.arange(tk) <= np.arange(tq)[:, None] + (tk - tq)
    return ok


def reference(x, mask, causal, log):
    """Float64 softmax over the allowed entries, 0 elsewhere."""
    ok = allowed(x.shape, mask, causal)
    x = x.astype(np.float64)
    m = np.where(ok, x, -np.inf).max(-1, keepdims=True, initial=-np.inf)
    m = np.where(np.isfinite(m), m, 0)
    e = np.where(ok, np.exp(x - m), 0)
    s = e.sum(-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        y = np.where(ok, x - m - np.log(s), 0) if log else e / np.where(s > 0, s, 1)
    return y


# (x shape, mask shape or None, causal); every mask gets a fully masked row
CASES = [
    ((3, 7), None, False),
    ((5,), None, False),
    ((4, 6), (4, 6), False),
    ((2, 3, 5, 7), (2, 1, 1, 7), False),    # padding mask broadcast over heads and queries
    ((2, 3, 5, 7), (2, 1, 1, 7), True),     # Tq < Tk: bottom-right aligned
    ((2, 6, 4), None, True),                # Tq > Tk: the first query rows see nothing
    ((2, 5, 3), (5, 3), True),
    ((1, 1, 1), None, True),
    ((0, 4), None, False),
    ((2, 3, 0), None, True),
]


def make(shape, mask_shape, dtype, rng):
    x = (rng.standard_normal(shape) * 3).astype(dtype)
    if mask_shape is None:
        return x, None
    mask = rng.random(mask_shape) > 0.3
    mask.reshape(-1, mask_shape[-1])[0] = False
    return x, mask


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
@pytest.mark.parametrize("shape, mask_shape, causal", CASES)
def test_forward_matches_reference(shape, mask_shape, causal, log, dtype, device, rng):
    x, mask = make(shape, mask_shape, dtype, rng)
    y = forward(device, log, x, mask, causal)
    assert y.dtype == dtype and y.shape == x.shape and np.all(np.isfinite(y))
    np.testing.assert_allclose(y, reference(x, mask, causal, log), **TOL[dtype])


@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
def test_fully_masked_rows_and_masked_values_never_leak(log, device):
    x = np.array([[1e30, -np.inf, np.nan, 2.0], [np.inf, np.nan, 3.0, 4.0]], np.float32)
    mask = np.array([[False, False, False, False], [False, False, True, True]])
    y = forward(device, log, x, mask)
    np.testing.assert_array_equal(y[0], 0)
    np.testing.assert_array_equal(y[1, :2], 0)
    np.testing.assert_allclose(y[1, 2:], reference(np.array([[3.0, 4.0]]), None, False, log)[0], rtol=1e-6)


def test_fully_masked_rows_are_zero_with_zero_gradient(device):
    x = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    mask = np.array([[True, False, True], [False, False, False]])
    for log in (False, True):
        y = forward(device, log, x, mask)
        assert np.all(np.isfinite(y)) and np.all(y[1] == 0) and y[0, 1] == 0
    dx = backward(device, True, np.ones_like(x), forward(device, True, x, mask), mask)
    assert np.all(dx[1] == 0) and dx[0, 1] == 0


@pytest.mark.filterwarnings("ignore::RuntimeWarning")      # the CUDA simulator's NumPy scalars warn at -inf + inf
def test_rows_of_minus_inf_scores_give_softmax_zeros_and_log_softmax_nan_as_torch(device):
    """Scores of -inf as an additive mask: softmax 0 (PyTorch: NaN, a documented difference); torch.log_softmax of
    an all -inf row is NaN (-inf - max = -inf + inf), of a -inf beside a finite score -inf. A masked entry stays 0."""
    x = np.array([[-np.inf, -np.inf, 5.0], [0.0, -np.inf, 5.0]], np.float32)
    mask = np.array([True, True, False])
    np.testing.assert_array_equal(forward(device, False, x, mask), [[0, 0, 0], [1, 0, 0]])
    np.testing.assert_array_equal(forward(device, True, x, mask), [[np.nan, np.nan, 0], [0, -np.inf, 0]])
    np.testing.assert_array_equal(forward(device, True, np.full((1, 3), -np.inf, np.float32)), [[np.nan] * 3])


@pytest.mark.parametrize("shift", [1e4, 1e6])
def test_log_softmax_of_large_logits_keeps_its_precision_in_float32(shift, device):
    """(x - m) - log Σ e^(x - m): torch.log_softmax of float32 [s, s, s - 1] is -log(2 + e^-1) = -0.8619948 and
    -1.8619948 (x - (m + log Σ) gave -0.8623047 at 1e4, -0.875 at 1e6)."""
    x = np.array([[shift, shift, shift - 1]], np.float32)
    np.testing.assert_allclose(forward(device, True, x),
                               [[-0.8619948040582511, -0.8619948040582511, -1.8619948040582512]], rtol=1e-7)


def test_causal_alignment_is_bottom_right(device):
    y = forward(device, False, np.zeros((2, 4)), None, True)    # Tq = 2 < Tk = 4: query i sees keys j <= i + 2
    np.testing.assert_allclose(y, [[1 / 3, 1 / 3, 1 / 3, 0], [1 / 4] * 4])
    y = forward(device, False, np.zeros((3, 2)), None, True)    # Tq = 3 > Tk = 2: query 0 sees nothing
    np.testing.assert_allclose(y, [[0, 0], [1, 0], [1 / 2, 1 / 2]])


@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
@pytest.mark.parametrize("shape, mask_shape, causal", [((3, 5), None, False), ((2, 4, 5), (2, 1, 5), True),
                                                       ((4, 3), (4, 3), True)])
def test_backward_matches_finite_differences(shape, mask_shape, causal, log, device, rng, numeric_grad):
    """The device's backward against central differences of the CPU's forward (one definition of the math)."""
    x, mask = make(shape, mask_shape, np.float64, rng)
    g = rng.standard_normal(shape)
    cpu_forward = cpu.log_softmax if log else cpu.softmax
    dx = backward(device, log, g, forward(device, log, x, mask, causal), mask, causal)
    np.testing.assert_allclose(dx, numeric_grad(lambda v: (cpu_forward(v, mask, causal) * g).sum(), x), atol=1e-8)
    np.testing.assert_array_equal(dx[~allowed(shape, mask, causal)], 0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("shape, mask_shape, causal", CASES)
def test_backward_formulas(shape, mask_shape, causal, dtype, device, rng):
    x, mask = make(shape, mask_shape, dtype, rng)
    g = rng.standard_normal(x.shape).astype(dtype)
    y = forward(device, False, x, mask, causal)
    dx = backward(device, False, g, y)
    assert dx.dtype == dtype
    np.testing.assert_allclose(dx, y * (g - (g * y).sum(-1, keepdims=True)), **TOL[dtype])
    ly = forward(device, True, x, mask, causal)
    ok = allowed(x.shape, mask, causal)
    expected = np.where(ok, g - np.exp(ly) * np.where(ok, g, 0).sum(-1, keepdims=True), 0)
    np.testing.assert_allclose(backward(device, True, g, ly, mask, causal), expected, **TOL[dtype])


def test_bad_arguments(device):
    with pytest.raises(ValueError, match="does not broadcast"):
        forward(device, False, np.zeros((2, 3)), np.ones((2, 2), bool))
    with pytest.raises(ValueError, match="does not broadcast"):
        forward(device, False, np.zeros((2, 3)), np.ones((3, 1), bool))
    with pytest.raises(ValueError, match="causal"):
        forward(device, False, np.zeros(3), None, True)
