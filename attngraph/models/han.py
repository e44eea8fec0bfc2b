"""Hierarchical attention networks for document classification (Yang et al. 2016)."""
from __future__ import annotations

import numpy as np

from ..attention import AttentionPooling
from ..core import functional as F
from ..core.tracing import Input
from ..nn import GRU, Embedding, Linear, Module
from ..nn.checks import integer, sizes
from . import tasks
from .registry import ModelSpec, register
from .tokens import padding_mask, vocabulary


class HAN(Module):
    """logits = HAN(...)(documents): documents (B, S, W) of S sentences of W word ids → logits (B, classes).

    Words, then sentences, each read by a bidirectional GRU and pooled by attention (section 2.2):

        h_it = [GRU→(x_it); GRU←(x_it)]      word encoder, x_it = E w_it
        s_i  = Σ_t α_it h_it                 word attention (``AttentionPooling``)
        h_i  = [GRU→(s_i); GRU←(s_i)]        sentence encoder
        v    = Σ_i α_i h_i                   sentence attention
        p    = softmax(W_c v + b_c)

    ``PAD`` (0) pads words at the end of a sentence and whole sentences at the end of a document; both
    levels are masked, and a sentence is padding when its first word is. B, S and W may be symbolic (each
    GRU direction is one ``scan``). The weights are recorded under ``word_attention``
    (B·S, 1, W) and ``sentence_attention`` (B, 1, S)."""

    def __init__(self, vocab: int, embed_dim: int = 32, word_hidden: int = 32, sentence_hidden: int = 32,
                 attention_dim: int = 32, classes: int = 2, rng=None):
        super().__init__()
        vocab, classes = vocabulary("vocab", vocab), integer("classes", classes, minimum=2)
        embed_dim, word_hidden, sentence_hidden, attention_dim = sizes(
            embed_dim=embed_dim, word_hidden=word_hidden, sentence_hidden=sentence_hidden, attention_dim=attention_dim)
        self.embed = Embedding(vocab, embed_dim, rng=rng)
        self.word_encoder = GRU(embed_dim, word_hidden, bidirectional=True, rng=rng)
        self.word_attention = AttentionPooling(2 * word_hidden, attention_dim, rng=rng)
        self.sentence_encoder = GRU(2 * word_hidden, sentence_hidden, bidirectional=True, rng=rng)
        self.sentence_attention = AttentionPooling(2 * sentence_hidden, attention_dim, rng=rng)
        self.classifier = Linear(2 * sentence_hidden, classes, rng=rng)

    def forward(self, documents):
        batch, sentences, words = documents.shape
        tokens = F.reshape(documents, (-1, words))                          # (B·S, W): every sentence
        word_mask = padding_mask(tokens)
        word_states, _ = self.word_encoder(self.embed(tokens), word_mask)
        sentence_vectors, _ = self.word_attention(word_states, word_mask)
        sentence_vectors = F.reshape(sentence_vectors, (batch, sentences, -1))
        sentence_mask = padding_mask(documents[:, :, 0])
        sentence_states, _ = self.sentence_encoder(sentence_vectors, sentence_mask)
        document, _ = self.sentence_attention(sentence_states, sentence_mask)
        return self.classifier(document)


def batch(model: HAN, rng: np.random.Generator, size: int) -> dict[str, np.ndarray]:
    """Whether a document holds the keyword, in one of up to 3 sentences of up to 4 words."""
    documents, labels = tasks.keyword_documents(rng, size, 3, 4, model.embed.num_embeddings)
    return dict(documents=documents, labels=labels)


register(ModelSpec(
    name="han",
    factory=HAN,
    inputs=lambda model: dict(documents=Input(("B", 3, 4), "int64")),
    batch=batch,
    loss=lambda model, documents, labels: F.cross_entropy(model(documents), labels),
    defaults=dict(vocab=32, embed_dim=32, word_hidden=32, sentence_hidden=32, attention_dim=32, classes=2),
    tiny=dict(vocab=10, embed_dim=8, word_hidden=8, sentence_hidden=8, attention_dim=8),
    description="Hierarchical attention network (Yang et al. 2016) classifying documents by a keyword",
))
