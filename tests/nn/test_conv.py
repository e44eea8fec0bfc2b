"""nn.Conv2d, nn.Conv1d and the pooling layers: PyTorch's initialization, the functional ops they call, and
their argument checks."""
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


@pytest.mark.parametrize("make, message", [
    (lambda: nn.Conv2d(3, 4, 0), "kernel_size must be an int >= 1"),
    (lambda: nn.Conv2d(3, 4, (3, 3, 3)), "kernel_size must be an int or 2 of them"),
    (lambda: nn.Conv2d(3, 4, 3, stride=0), "stride must be an int >= 1"),
    (lambda: nn.Conv2d(3, 4, 3, padding=-1), "padding must be an int >= 0"),
    (lambda: nn.Conv1d(3, 4, 3, padding=1, causal=True), "leave padding at 0"),
    (lambda: nn.MaxPool2d(2, stride=(1, 0)), "stride must be an int >= 1"),
])
def test_bad_arguments_are_refused_when_the_layer_is_built(make, message):
    with pytest.raises(ValueError, match=message):
        make()
