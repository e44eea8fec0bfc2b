"""ELMo (Peters et al. 2018, "Deep contextualized word representations"): a bidirectional LSTM language model
whose layers a downstream model mixes with learned weights.

A small, character-free version: tokens t_1 … t_N are embedded, x_k = E t_k, and read by two L-layer LSTM
language models with separate parameters, sharing the embedding and the softmax layer Θ_s (section 3.1):

    forward LM:   h→_{k,j} = LSTM→_j(h→_{k,j−1}),  p(t_{k+1} | t_1 … t_k) = softmax(Θ_s h→_{k,L})
    backward LM:  h←_{k,j} = LSTM←_j(h←_{k,j−1}),  p(t_{k−1} | t_k … t_N) = softmax(Θ_s h←_{k,L})

with h→_{k,0} = h←_{k,0} = x_k; training minimizes the sum of the two directions' mean negative
log-likelihoods. The representations of token k are R_k = {h_{k,j} | j = 0 … L}, h_{k,j} = [h→_{k,j}; h←_{k,j}]
(the token layer h_{k,0} = [x_k; x_k], as the reference implementation duplicates it), and a task mixes them
(equation 1, ``nn.ScalarMix``):

    ELMo_k^task = γ^task Σ_j s_j^task h_{k,j},    s^task = softmax(w^task)

The paper's biLM projects 4096 LSTM units to 512 and adds a residual connection between layers; here the LSTM
width is the embedding width and there is no residual. A downstream model keeps its own mix::

    class Tagger(ag.Module):
        def __init__(self, elmo, tags):
            super().__init__()
            self.elmo, self.mix = elmo, ag.nn.ScalarMix(elmo.layers + 1)
            self.out = ag.nn.Linear(2 * elmo.dim, tags)

        def forward(self, tokens):      # the biLM frozen, as in section 3.3
            return self.out(self.mix(ag.stop_gradient(h) for h in self.elmo.representations(tokens)))
"""
from __future__ import annotations

import numpy as np

from ..core import functional as F
from ..core.tracing import Input
from ..nn import Embedding, Linear, LSTMCell, Module, ModuleList, Recurrent
from ..nn.checks import flag, integer
from . import tasks
from .registry import ModelSpec, register
from .tokens import PAD, padding_mask, vocabulary


class DirectionalLM(Module):
    """layers = DirectionalLM(dim, layers, backward)(x, mask): a stack of LSTMs over x (B, T, dim) reading left to
    right, or right to left when ``backward``; each layer reads the one below, one ``scan`` per layer, so T may be
    symbolic. Returns each layer's states (B, T, dim), zero at padded steps (``mask`` (B, T), True at real tokens;
    see ``nn.Recurrent``)."""

    def __init__(self, dim: int, layers: int, backward: bool, rng=None):
        super().__init__()
        self.backward = flag("backward", backward)
        self.cells = ModuleList(LSTMCell(dim, dim, rng) for _ in range(layers))

    def forward(self, x, mask):
        states = []
        for cell in self.cells:
            x, _ = Recurrent.unroll(cell, x, mask, reverse=self.backward)
            states.append(x)
        return states

    def extra_repr(self) -> str:
        return f"backward={self.backward}"


class ELMo(Module):
    """forward_logits, backward_logits = ELMo(vocab, dim, layers)(tokens): the biLM of the module docstring.

    tokens (B, T), ``PAD`` (0) only at the end of a row. ``forward_logits[:, k]`` (B, T, vocab)
    predicts tokens[:, k + 1] from tokens[:, :k + 1]; ``backward_logits[:, k]`` predicts tokens[:, k − 1]
    from tokens[:, k:]. ``representations(tokens)`` gives the L + 1 layers (B, T, 2·dim) to mix."""

    def __init__(self, vocab: int, dim: int = 32, layers: int = 2, rng=None):
        super().__init__()
        vocab, self.dim, self.layers = vocabulary("vocab", vocab), integer("dim", dim), integer("layers", layers)
        self.embed = Embedding(vocab, self.dim, rng=rng)
        self.forward_lm = DirectionalLM(self.dim, self.layers, backward=False, rng=rng)
        self.backward_lm = DirectionalLM(self.dim, self.layers, backward=True, rng=rng)
        self.softmax = Linear(self.dim, vocab, rng=rng)

    def directions(self, tokens) -> tuple[list, list]:
        """The forward and the backward LM's layers j = 0 … L, each (B, T, dim); layer 0 is the embedding."""
        x, mask = self.embed(tokens), padding_mask(tokens)
        return [x, *self.forward_lm(x, mask)], [x, *self.backward_lm(x, mask)]

    def forward(self, tokens):
        forward_layers, backward_layers = self.directions(tokens)
        return self.softmax(forward_layers[-1]), self.softmax(backward_layers[-1])

    def representations(self, tokens) -> list:
        """h_{k,j} = [h→_{k,j}; h←_{k,j}] for j = 0 … L: L + 1 tensors (B, T, 2·dim) for ``nn.ScalarMix``."""
        return [F.concat([f, b], axis=-1) for f, b in zip(*self.directions(tokens))]

    def extra_repr(self) -> str:
        return f"dim={self.dim}, layers={self.layers}"


def bidirectional_loss(model: ELMo, tokens):
    """The sum of the two directions' losses over the real (non-PAD) targets:
    −(1/|fwd|) Σ_k log p(t_{k+1} | t_≤k) − (1/|bwd|) Σ_k log p(t_{k−1} | t_≥k)."""
    forward_logits, backward_logits = model(tokens)
    return (F.cross_entropy(forward_logits[:, :-1], tokens[:, 1:], ignore_index=PAD)
            + F.cross_entropy(backward_logits[:, 1:], tokens[:, :-1], ignore_index=PAD))


LENGTH = 8


def batch(model: ELMo, rng: np.random.Generator, size: int) -> dict[str, np.ndarray]:
    """Counting sequences of ``LENGTH`` tokens: each follows from the two before it, and from the two after it."""
    return dict(tokens=tasks.counting(rng, size, LENGTH, model.embed.num_embeddings))


register(ModelSpec(
    name="elmo",
    factory=ELMo,
    inputs=lambda model: dict(tokens=Input(("B", LENGTH), "int64")),
    batch=batch,
    loss=bidirectional_loss,
    defaults=dict(vocab=32, dim=32, layers=2),
    tiny=dict(vocab=12, dim=8, layers=2),
    description="ELMo (Peters et al. 2018): forward and backward LSTM language models on counting sequences",
))
