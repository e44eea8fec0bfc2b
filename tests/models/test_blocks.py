"""Transformer layers against NumPy: post-norm and pre-norm residual connections, the feed-forward network,
causal self-attention and cross-attention with a padded memory."""
import numpy as np
import pytest

import attngraph as ag
from attngraph.models.blocks import DecoderLayer, EncoderLayer, gelu_exact
from tests.nn.reference import layer_norm, linear, multi_head_attention

D, HEADS, FF = 4, 2, 6


def ffn(layer, x):
    """W₂ ReLU(W₁ x + b₁) + b₂."""
    return linear(layer.ffn[2], np.maximum(linear(layer.ffn[0], x), 0))


def sublayer(layer, x, f, norm):
    return x + f(layer_norm(x, norm)) if layer.pre_norm else layer_norm(x + f(x), norm)


def with_random_norms(layer, rng):
    """LayerNorm γ, β away from 1, 0, so that a norm applied in the wrong place shows."""
    for _, module in layer.named_modules():
        if isinstance(module, ag.nn.LayerNorm):
            module.weight.data = rng.uniform(0.5, 1.5, D).astype(np.float32)
            module.bias.data = rng.uniform(-0.5, 0.5, D).astype(np.float32)
    return layer


@pytest.mark.parametrize("pre_norm", [False, True])
def test_encoder_layer_matches_its_residual_formula(pre_norm, rng):
    layer = with_random_norms(EncoderLayer(D, HEADS, FF, pre_norm=pre_norm, rng=rng), rng)
    x = rng.standard_normal((2, 5, D)).astype(np.float32)
    padding = np.array([[True] * 3 + [False] * 2, [True] * 5])
    got = ag.trace(layer, x=x, mask=padding).compile()(x=x, mask=padding)
    h = sublayer(layer, x, lambda h: multi_head_attention(layer.self_attn, h, h, h, padding[:, None, None]),
                 layer.self_attn_norm)
    np.testing.assert_allclose(got, sublayer(layer, h, lambda h: ffn(layer, h), layer.ffn_norm), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("pre_norm", [False, True])
def test_decoder_layer_matches_its_residual_formula(pre_norm, rng):
    layer = with_random_norms(DecoderLayer(D, HEADS, FF, pre_norm=pre_norm, rng=rng), rng)
    x = rng.standard_normal((2, 4, D)).astype(np.float32)
    memory = rng.standard_normal((2, 3, D)).astype(np.float32)
    memory_mask = np.array([[True, True, False], [True] * 3])
    got = ag.trace(layer, x=x, memory=memory, memory_mask=memory_mask).compile()(
        x=x, memory=memory, memory_mask=memory_mask)
    causal, padding = np.tril(np.ones((4, 4), bool)), memory_mask[:, None, None]
    h = sublayer(layer, x, lambda h: multi_head_attention(layer.self_attn, h, h, h, causal), layer.self_attn_norm)
    h = sublayer(layer, h, lambda h: multi_head_attention(layer.cross_attn, h, memory, memory, padding),
                 layer.cross_attn_norm)
    np.testing.assert_allclose(got, sublayer(layer, h, lambda h: ffn(layer, h), layer.ffn_norm), rtol=1e-4, atol=1e-5)



@pytest.mark.parametrize("model", [lambda **kw: ag.models.GPT(12, **kw), lambda **kw: ag.models.BERT(12, **kw),
                                   lambda **kw: ag.models.ViT(**kw)], ids=["gpt", "bert", "vit"])
def test_the_gelu_variant_and_layer_norm_eps_reach_every_layer(model):
    built = model(d_model=8, heads=2, layers=2, d_ff=16, dropout=0.0, gelu="none", layer_norm_eps=1e-12)
    assert {m.eps for _, m in built.named_modules() if isinstance(m, ag.nn.LayerNorm)} == {1e-12}
    assert {m.fn for _, m in built.named_modules() if isinstance(m, ag.nn.Activation)} == {gelu_exact}
    assert {m.fn for _, m in model().named_modules() if isinstance(m, ag.nn.Activation)} == {ag.gelu}
    with pytest.raises(ValueError, match="gelu must be one of 'tanh', 'none', got 'erf'"):
        model(gelu="erf")
    with pytest.raises(ValueError, match="layer_norm_eps must be a finite number > 0, got 0"):
        model(layer_norm_eps=0)
