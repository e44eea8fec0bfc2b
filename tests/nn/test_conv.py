"""nn.Conv1d/2d/3d, nn.ConvTranspose1d/2d and the pooling layers: PyTorch's initialization and weight layouts,
the functional ops they call, and their argument checks."""
import numpy as np
import pytest

import attngraph as ag
from attngraph import nn


def test_conv_initialization_is_pytorchs_kaiming_uniform():
    """Kaiming-uniform with a = √5 gives U(±1/√fan_in) for the weight; the bias draws from the same bound."""
    conv = nn.Conv2d(8, 16, (3, 5), rng=np.random.default_rng(0))
    bound = 1 / np.sqrt(8 * 3 * 5)
    assert conv.weight.shape == (16, 8, 3, 5) and conv.bias.shape == (16,)
    for p in (conv.weight.data, conv.bias.data):
        assert p.dtype == np.float32 and np.abs(p).max() <= bound
    assert np.abs(conv.weight.data).max() > 0.95 * bound          # the whole range is used
    assert conv.weight.data.std() == pytest.approx(bound / np.sqrt(3), rel=0.05)
    assert nn.Conv1d(4, 2, 3, bias=False).bias is None


def test_layers_call_the_functional_ops():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 6, 10)).astype(np.float32)
    conv = nn.Conv2d(3, 4, 3, stride=(1, 2), padding=1, dilation=(2, 1))
    y = ag.trace(nn.Sequential(conv, nn.MaxPool2d(2), nn.AvgPool2d((1, 2), 1)), x=ag.Input(("B", 3, 6, 10))) \
        .compile()(x=x)
    direct = ag.trace(lambda x: ag.avg_pool2d(ag.max_pool2d(ag.conv2d(x, conv.weight.data, conv.bias.data, (1, 2), 1,
                                                                      (2, 1)), 2), (1, 2), 1),
                      x=ag.Input(x.shape)).compile()(x=x)
    assert y.shape == (2, 4, 2, 1)
    np.testing.assert_array_equal(y, direct)
    causal = nn.Conv1d(3, 4, 2, dilation=3, causal=True)
    seq = rng.standard_normal((2, 3, 7)).astype(np.float32)
    y = ag.trace(nn.Sequential(causal, nn.MaxPool1d(2, 1), nn.AvgPool1d(3)), x=ag.Input((2, 3, 7))).compile()(x=seq)
    want = ag.trace(lambda x: ag.avg_pool1d(ag.max_pool1d(ag.conv1d(x, causal.weight.data, causal.bias.data,
                                                                     dilation=3, causal=True), 2, 1), 3),
                    x=ag.Input(seq.shape)).compile()(x=seq)
    np.testing.assert_array_equal(y, want)
    assert "causal=True" in repr(causal) and "kernel_size=(2,)" in repr(causal)


def test_grouped_and_transposed_weights_have_pytorchs_layouts_and_bounds():
    """Conv weights are (O, C/groups, *k), transposed ones (C, O/groups, *k); fan_in is weight.shape[1]·prod(k)."""
    for layer, shape in [(nn.Conv2d(6, 4, 3, groups=2), (4, 3, 3, 3)), (nn.Conv1d(4, 4, 5, groups=4), (4, 1, 5)),
                         (nn.Conv3d(2, 4, (1, 2, 3)), (4, 2, 1, 2, 3)),
                         (nn.ConvTranspose2d(6, 4, (2, 3), groups=2), (6, 2, 2, 3)),
                         (nn.ConvTranspose1d(3, 5, 2), (3, 5, 2))]:
        assert layer.weight.shape == shape
        assert np.abs(layer.weight.data).max() <= 1 / np.sqrt(shape[1] * np.prod(shape[2:]))
    with pytest.raises(TypeError, match="padding must be an int, got 'same'"):       # torch has no "same" there
        nn.ConvTranspose2d(3, 4, 3, padding="same")


def test_new_layers_call_their_functional_ops():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 4, 5, 6)).astype(np.float32)
    cases = [
        (nn.Conv2d(4, 6, 3, padding="same", groups=2), lambda m, x: ag.conv2d(x, m.weight.data, m.bias.data,
                                                                               padding="same", groups=2)),
        (nn.ConvTranspose2d(4, 2, 3, stride=2, padding=1, output_padding=1),
         lambda m, x: ag.conv_transpose2d(x, m.weight.data, m.bias.data, 2, 1, 1)),
        (nn.MaxPool2d(3, 2, padding=1, ceil_mode=True), lambda m, x: ag.max_pool2d(x, 3, 2, 1, ceil_mode=True)),
        (nn.AvgPool2d(3, 2, 1, count_include_pad=False, divisor_override=2),
         lambda m, x: ag.avg_pool2d(x, 3, 2, 1, False, False, 2)),
        (nn.AdaptiveAvgPool2d((2, 4)), lambda m, x: ag.adaptive_avg_pool2d(x, (2, 4))),
        (nn.AdaptiveMaxPool2d(3), lambda m, x: ag.adaptive_max_pool2d(x, 3)),
    ]
    for layer, fn in cases:
        got = ag.trace(layer, x=ag.Input(x.shape)).compile()(x=x)
        np.testing.assert_array_equal(got, ag.trace(lambda x: fn(layer, x), x=ag.Input(x.shape)).compile()(x=x))
    values, indices = ag.trace(nn.MaxPool1d(2, return_indices=True), x=ag.Input((2, 4, 6))).compile()(x=x[..., 0, :])
    np.testing.assert_array_equal(np.take_along_axis(x[..., 0, :], indices, -1), values)
    volume = rng.standard_normal((1, 2, 3, 4, 4)).astype(np.float32)
    conv3 = nn.Conv3d(2, 3, 2, padding=1)
    assert ag.trace(conv3, x=ag.Input(volume.shape)).compile()(x=volume).shape == (1, 3, 4, 5, 5)
    seq = x[:, :, 0]
    for layer, shape in [(nn.ConvTranspose1d(4, 2, 3, stride=2), (2, 2, 13)), (nn.AdaptiveAvgPool1d(4), (2, 4, 4)),
                         (nn.AdaptiveMaxPool1d(5), (2, 4, 5)), (nn.AvgPool1d(2, padding=1, ceil_mode=True), (2, 4, 4))]:
        assert ag.trace(layer, x=ag.Input(seq.shape)).compile()(x=seq).shape == shape
    assert "groups=2" in repr(cases[0][0]) and "output_padding=(1, 1)" in repr(cases[1][0])


@pytest.mark.parametrize("make, message", [
    (lambda: nn.Conv2d(3, 4, 0), "kernel_size must be an int >= 1"),
    (lambda: nn.Conv2d(3, 4, 3, groups=2), "in_channels \\(3\\) must be divisible by groups \\(2\\)"),
    (lambda: nn.Conv2d(4, 3, 3, groups=2), "out_channels \\(3\\) must be divisible by groups"),
    (lambda: nn.ConvTranspose2d(3, 4, 3, stride=2, output_padding=2), "output_padding .* smaller than the stride"),
    (lambda: nn.MaxPool2d(2, dilation=0), "dilation must be an int >= 1"),
    (lambda: nn.AvgPool2d(2, divisor_override=0), "divisor_override must be an int >= 1"),
    (lambda: nn.Conv2d(3, 4, (3, 3, 3)), "kernel_size must be an int or 2 of them"),
    (lambda: nn.Conv2d(3, 4, 3, stride=0), "stride must be an int >= 1"),
    (lambda: nn.Conv2d(3, 4, 3, padding=-1), "padding must be an int >= 0"),
    (lambda: nn.Conv1d(3, 4, 3, padding=1, causal=True), "leave padding at 0"),
    (lambda: nn.MaxPool2d(2, stride=(1, 0)), "stride must be an int >= 1"),
])
def test_bad_arguments_are_refused_when_the_layer_is_built(make, message):
    with pytest.raises(ValueError, match=message):
        make()
