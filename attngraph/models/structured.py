"""A sentence classifier on the structured self-attentive sentence embedding (Lin et al. 2017)."""
from __future__ import annotations


from ..attention import StructuredSelfAttention, redundancy_penalty
from ..core import functional as F
from ..core.tracing import Input
from ..nn import LSTM, MLP, Embedding, Module
from ..nn.checks import integer, non_negative, sizes
from . import tasks
from .registry import ModelSpec, register
from .tokens import padding_mask, vocabulary


class StructuredClassifier(Module):
    """logits, A = StructuredClassifier(...)(tokens): tokens (B, n) → logits (B, classes) and the
    attention matrix A (B, hops, n).

    A bidirectional LSTM reads the sentence into H (B, n, 2u); ``hops`` attention rows
    A = softmax(W_s2 tanh(W_s1 Hᵀ)) give the embedding matrix M = AH (B, hops, 2u), which is flattened and
    classified by a one-hidden-layer ReLU MLP (section 2). ``PAD`` (0) positions get no attention.
    n may be symbolic (each LSTM direction is one ``scan``). Train with ``loss``, which adds the penalty on A."""

    def __init__(self, vocab: int, embed_dim: int = 32, hidden: int = 32, attention_dim: int = 32, hops: int = 4,
                 mlp_hidden: int = 64, classes: int = 2, penalty: float = 1.0, rng=None):
        super().__init__()
        vocab, classes = vocabulary("vocab", vocab), integer("classes", classes, minimum=2)
        embed_dim, hidden, attention_dim, hops, mlp_hidden = sizes(
            embed_dim=embed_dim, hidden=hidden, attention_dim=attention_dim, hops=hops, mlp_hidden=mlp_hidden)
        self.penalty = non_negative("penalty", penalty)
        self.embed = Embedding(vocab, embed_dim, rng=rng)
        self.encoder = LSTM(embed_dim, hidden, bidirectional=True, rng=rng)
        self.attention = StructuredSelfAttention(2 * hidden, attention_dim, hops, rng=rng)
        self.classifier = MLP([hops * 2 * hidden, mlp_hidden, classes], activation=F.relu, rng=rng)

    def forward(self, tokens):
        mask = padding_mask(tokens)
        states, _ = self.encoder(self.embed(tokens), mask)
        embedding, weights = self.attention(states, mask)
        return self.classifier(F.reshape(embedding, (embedding.shape[0], -1))), weights


def loss(model: StructuredClassifier, tokens, labels):
    """Cross-entropy plus ``model.penalty`` · ‖AAᵀ − I‖²_F (batch-averaged; see ``redundancy_penalty``),
    which pushes the hops to attend to different words (Lin et al. 2017, section 2.2)."""
    logits, weights = model(tokens)
    return F.cross_entropy(logits, labels) + model.penalty * redundancy_penalty(weights)


LENGTH = 6  # the sentence length of the registry's examples


register(ModelSpec(
    name="structured",
    factory=StructuredClassifier,
    inputs=lambda model: dict(tokens=Input(("B", LENGTH), "int64")),
    batch=tasks.keyword_batch(LENGTH),
    loss=loss,
    defaults=dict(vocab=32, embed_dim=32, hidden=32, attention_dim=32, hops=4, mlp_hidden=64, classes=2, penalty=1.0),
    tiny=dict(vocab=10, embed_dim=8, hidden=8, attention_dim=8, hops=2, mlp_hidden=16),
    description="Structured self-attentive sentence classifier (Lin et al. 2017) with the penalty in its loss",
))
