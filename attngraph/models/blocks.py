"""Transformer layers (Vaswani et al. 2017), shared by the transformer, GPT, BERT and ViT.

Every sub-layer (self-attention, cross-attention, the position-wise feed-forward network) sits in a
residual connection with layer normalization, placed one of two ways:

    post-norm (the paper):                         x ← LN(x + Dropout(sublayer(x)))
    pre-norm  (GPT-2, ViT; Xiong et al. 2020):     x ← x + Dropout(sublayer(LN(x)))

Pre-norm leaves the residual stream unnormalized, so a pre-norm stack ends with one more LayerNorm.
"""
from __future__ import annotations

from typing import Callable

from ..attention import MultiHeadAttention
from ..core import functional as F
from ..nn import MLP, Dropout, LayerNorm, Module, ModuleList
from ..nn.checks import divisible, flag, function, integer, one_of, positive, probability, sizes


def gelu_exact(x):
    """GELU in its exact form x·Φ(x), Φ the standard normal CDF (BERT, ViT); ``F.gelu`` is the tanh approximation
    (GPT-2)."""
    return F.gelu(x, approximate="none")


GELU = {"tanh": F.gelu, "none": gelu_exact}     # by ``approximate``, as PyTorch's nn.GELU


def gelu_and_eps(gelu, layer_norm_eps) -> tuple[Callable, float]:
    """The GELU function named by ``gelu`` ("tanh" or "none") and the LayerNorms' ``layer_norm_eps`` (> 0), checked."""
    return GELU[one_of("gelu", gelu, GELU)], positive("layer_norm_eps", layer_norm_eps)


def stack_settings(layers, d_model, heads, d_ff, dropout) -> tuple[int, int, int, int, float]:
    """The settings of a stack of transformer layers, checked together (sizes >= 1, d_model divisible by heads,
    dropout in [0, 1)), so that a model can refuse them before it draws its first parameter."""
    layers, d_model, heads, d_ff = sizes(layers=layers, d_model=d_model, heads=heads, d_ff=d_ff)
    return layers, divisible("d_model", d_model, "heads", heads), heads, d_ff, probability("dropout", dropout)


class EncoderLayer(Module):
    """x ← sublayer(x) for self-attention then the feed-forward network FFN(x) = W₂ act(W₁x + b₁) + b₂
    (d_model → d_ff → d_model at every position; act is ReLU in the paper, GELU in GPT, BERT and ViT). Its
    LayerNorms use ``layer_norm_eps`` (1e-5 as PyTorch; 1e-12 in BERT and ViT).

    ``layer(x, mask=None, causal=False, cache=None)``: x (B, T, d_model), ``mask`` a (B, T) padding mask or
    anything ``MultiHeadAttention`` takes; ``causal`` makes it a decoder-only (GPT) layer; ``cache`` is the
    self-attention's key/value cache. ``kv_heads`` and ``alibi`` configure the self-attention (grouped-query
    attention, ALiBi)."""

    def __init__(self, d_model: int, heads: int, d_ff: int, dropout: float = 0.0, pre_norm: bool = False,
                 activation: Callable = F.relu, rng=None, layer_norm_eps: float = 1e-5, kv_heads: int | None = None,
                 alibi: bool = False):
        super().__init__()
        d_ff, dropout = integer("d_ff", d_ff), probability("dropout", dropout)
        self.pre_norm, activation = flag("pre_norm", pre_norm), function("activation", activation)
        self.self_attn = MultiHeadAttention(d_model, heads, dropout, rng=rng, kv_heads=kv_heads, alibi=alibi)
        self.self_attn_norm = LayerNorm(d_model, layer_norm_eps)
        self.ffn = MLP([d_model, d_ff, d_model], activation, dropout, rng=rng)
        self.ffn_norm = LayerNorm(d_model, layer_norm_eps)
        self.dropout = Dropout(dropout)

    def residual(self, x, sublayer: Callable, norm: LayerNorm):
        if self.pre_norm:
            return x + self.dropout(sublayer(norm(x)))
        return norm(x + self.dropout(sublayer(x)))

    def forward(self, x, mask=None, causal: bool = False, cache: dict | None = None):
        x = self.residual(x, lambda h: self.self_attn(h, h, h, mask=mask, causal=causal, cache=cache),
                          self.self_attn_norm)
        return self.residual(x, self.ffn, self.ffn_norm)


class DecoderLayer(EncoderLayer):
    """Causal self-attention, then cross-attention to the encoder's output ``memory``, then the
    feed-forward network, each in its residual connection.

    ``layer(x, memory, memory_mask=None)``: x (B, T, d_model), memory (B, S, d_model), ``memory_mask``
    the source's (B, S) padding mask."""

    def __init__(self, d_model: int, heads: int, d_ff: int, dropout: float = 0.0, pre_norm: bool = False,
                 activation: Callable = F.relu, rng=None, layer_norm_eps: float = 1e-5):
        super().__init__(d_model, heads, d_ff, dropout, pre_norm, activation, rng, layer_norm_eps)
        self.cross_attn = MultiHeadAttention(d_model, heads, dropout, rng=rng)
        self.cross_attn_norm = LayerNorm(d_model, layer_norm_eps)

    def forward(self, x, memory, memory_mask=None):
        x = self.residual(x, lambda h: self.self_attn(h, h, h, causal=True), self.self_attn_norm)
        x = self.residual(x, lambda h: self.cross_attn(h, memory, memory, mask=memory_mask), self.cross_attn_norm)
        return self.residual(x, self.ffn, self.ffn_norm)


class Encoder(Module):
    """A stack of ``layers`` encoder layers (their arguments as ``EncoderLayer``), with a final LayerNorm
    when pre-norm. ``encoder(x, mask=None, causal=False)`` passes its arguments to every layer;
    ``caches``, one per layer, are their key/value caches."""

    layer = EncoderLayer

    def __init__(self, layers: int, d_model: int, heads: int, d_ff: int, dropout: float = 0.0,
                 pre_norm: bool = False, activation: Callable = F.relu, rng=None, layer_norm_eps: float = 1e-5,
                 **attention):
        super().__init__()
        layers, d_model, heads, d_ff, dropout = stack_settings(layers, d_model, heads, d_ff, dropout)
        self.layers = ModuleList(self.layer(d_model, heads, d_ff, dropout, pre_norm, activation, rng, layer_norm_eps,
                                            **attention) for _ in range(layers))
        self.norm = LayerNorm(d_model, layer_norm_eps) if pre_norm else None

    def forward(self, x, *args, caches=None, **kwargs):
        for i, layer in enumerate(self.layers):
            x = layer(x, *args, **kwargs) if caches is None else layer(x, *args, cache=caches[i], **kwargs)
        return x if self.norm is None else self.norm(x)


class Decoder(Encoder):
    """A stack of decoder layers: ``decoder(x, memory, memory_mask=None)``."""

    layer = DecoderLayer
