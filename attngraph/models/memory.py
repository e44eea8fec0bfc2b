"""Models that read an external memory by attention: an NTM read head and end-to-end memory networks.

``NTMReader`` — Graves et al. 2014, "Neural Turing Machines", content-based addressing (§3.3.1) and
sharpening (§3.3.2): a controller emits a key k, a strength β = softplus(·) and a sharpening γ = 1 + softplus(·);
w_i = softmax_i(β cos(k, M_i)), w̃_i = w_i^γ / Σ_j w_j^γ, r = Σ_i w̃_i M_i (``attention.ContentReadHead``).

``MemN2N`` — Sukhbaatar et al. 2015, "End-To-End Memory Networks". Each sentence x_i of a story becomes a
memory m_i (with embedding A) and an output vector c_i (with embedding C), the question q a state u (with B);
each of K hops reads the memory by attention and adds what it read:

    p_i = softmax_i(u_kᵀ m_i)      o_k = Σ_i p_i c_i      u_{k+1} = u_k + o_k   (or H u_k + o_k)
    â = softmax(W u_{K+1})

with adjacent weight tying (§2.2): A_{k+1} = C_k, B = A_1, W = C_Kᵀ — K + 1 embedding tables in all.
Sentences are bags of words with position encoding (§4.1), m_i = Σ_j l_j ∘ A x_ij,
l_kj = (1 − j/J) − (k/d)(1 − 2j/J), and temporal encoding (§4.1), m_i += T_A(i), c_i += T_C(i), the
temporal tables tied like A and C.
"""
from __future__ import annotations

import numpy as np

from ..attention import ContentReadHead, attend
from ..core import functional as F
from ..core.tracing import Input
from ..errors import DataError, ShapeError
from ..nn import Embedding, Linear, Module, ModuleList
from ..nn.checks import flag, sizes
from . import tasks
from .registry import ModelSpec, register
from .tokens import PAD, padding_mask, vocabulary


class NTMReader(Module):
    """logits = NTMReader(vocab, ...)(keys, values, query): associative recall through an NTM read head.

    keys and values (B, N) token ids are written to a memory of N rows M_i = W_m [E key_i; E value_i] + b_m;
    an MLP controller h = tanh(W_h E query + b_h) reads it by content (``ContentReadHead``), and the logits
    (B, vocab) of the recalled value are W_o [h; r] + b_o. The read weights are recorded under
    ``head.addressing``."""

    def __init__(self, vocab: int, embed_dim: int = 16, memory_dim: int = 32, hidden: int = 32, rng=None):
        super().__init__()
        vocab = vocabulary("vocab", vocab)
        embed_dim, memory_dim, hidden = sizes(embed_dim=embed_dim, memory_dim=memory_dim, hidden=hidden)
        self.embed = Embedding(vocab, embed_dim, rng=rng)
        self.write = Linear(2 * embed_dim, memory_dim, rng=rng)
        self.controller = Linear(embed_dim, hidden, rng=rng)
        self.head = ContentReadHead(hidden, memory_dim, rng=rng)
        self.out = Linear(hidden + memory_dim, vocab, rng=rng)

    def forward(self, keys, values, query):
        memory = self.write(F.concat([self.embed(keys), self.embed(values)], axis=-1))
        h = F.tanh(self.controller(self.embed(query)))
        read, _ = self.head(h, memory)
        return self.out(F.concat([h, read], axis=-1))


def position_encoding(words: int, dim: int) -> np.ndarray:
    """(J, d) float32 weights l_kj = (1 − j/J) − (k/d)(1 − 2j/J) of word j and feature k, both from 1
    (Sukhbaatar et al. 2015, §4.1)."""
    j = np.arange(1, words + 1)[:, None] / words
    k = np.arange(1, dim + 1)[None, :] / dim
    return ((1 - j) - k * (1 - 2 * j)).astype(np.float32)


class MemoryRead(Module):
    """o = MemoryRead()(u, memory, output, mask): one hop's read, p_i = softmax_i(uᵀ m_i) over the memories
    ``mask`` (B, S) allows and o = Σ_i p_i c_i, for u (B, d), memory and output (B, S, d). A module so that
    each hop's attention has its own scope."""

    def forward(self, u, memory, output, mask):
        read, _ = attend(F.expand_dims(u, -2) @ F.swapaxes(memory, -1, -2), output, F.expand_dims(mask, -2))
        return read[:, 0]


class MemN2N(Module):
    """logits = MemN2N(vocab, ...)(story, question): story (B, S, J) of S sentences of J word ids, question
    (B, J') of J' word ids, logits (B, vocab) of the one-word answer; equations in the module docstring.

    ``PAD`` (0) pads words at the end of a sentence and whole sentences at the end of a story: padded words
    add nothing to a sentence, and a padded sentence (first word PAD) is masked out of every hop's attention.
    J in the position encoding is the padded length (J or J', which must be concrete). Temporal encoding
    numbers the memories from the most recent, T(0) for the last real sentence, as the paper does;
    S ≤ ``memory_size``. ``linear_map`` uses u_{k+1} = H u_k + o_k with one H shared by the hops. The
    attention of hop k is recorded under ``hop_reads.{k − 1}``. Embeddings start from N(0, 0.1²), as in the
    paper."""

    def __init__(self, vocab: int, dim: int = 32, hops: int = 3, memory_size: int = 8, linear_map: bool = False,
                 rng=None):
        super().__init__()
        vocab = vocabulary("vocab", vocab)
        self.dim, self.hops, self.memory_size = sizes(dim=dim, hops=hops, memory_size=memory_size)
        linear_map = flag("linear_map", linear_map)
        self.embeddings = ModuleList(Embedding(vocab, self.dim, std=0.1, rng=rng) for _ in range(self.hops + 1))
        self.temporal = ModuleList(Embedding(self.memory_size, self.dim, std=0.1, rng=rng)
                                   for _ in range(self.hops + 1))
        self.map = Linear(self.dim, self.dim, bias=False, rng=rng) if linear_map else None
        self.hop_reads = ModuleList(MemoryRead() for _ in range(self.hops))

    def memory_in(self, k: int) -> tuple[Embedding, Embedding]:
        """A_k and T_A of hop k (1 ≤ k ≤ K); B is A_1."""
        return self.embeddings[k - 1], self.temporal[k - 1]

    def memory_out(self, k: int) -> tuple[Embedding, Embedding]:
        """C_k and T_C of hop k (1 ≤ k ≤ K); W is C_Kᵀ."""
        return self.embeddings[k], self.temporal[k]

    def forward(self, story, question):
        sentences = story.shape[1]
        if isinstance(sentences, str) or sentences > self.memory_size:
            raise ShapeError(f"a story of {sentences} sentences does not fit a memory of {self.memory_size}: "
                             "trace with a concrete number of sentences <= memory_size")
        mask = padding_mask(story[:, :, 0])
        count = F.sum(mask.astype(np.int64), axis=1, keepdims=True)
        age = F.maximum(count - 1 - F.arange(mask), 0)                # (B, S): 0 for the most recent sentence

        def sentences_of(embedding, temporal):
            return self.bag(embedding, story) + temporal(age)

        u = self.bag(self.embeddings[0], question)
        for k, hop in enumerate(self.hop_reads, start=1):
            read = hop(u, sentences_of(*self.memory_in(k)), sentences_of(*self.memory_out(k)), mask)
            u = (u if self.map is None else self.map(u)) + read
        return u @ F.swapaxes(self.embeddings[self.hops].weight, 0, 1)

    def bag(self, embedding: Embedding, tokens):
        """Σ_j l_j ∘ E x_j over the J words of tokens (..., J), padded words left out: (..., d)."""
        words = tokens.shape[-1]
        if isinstance(words, str):
            raise ShapeError(f"the position encoding needs a concrete number of words per sentence, not {words!r}: "
                             "trace with e.g. ag.Input(('B', 6, 4), 'int64')")
        embedded = embedding(tokens)
        real = F.expand_dims(F.not_equal(tokens, PAD).astype(embedded.dtype), -1)
        return F.sum(embedded * real * position_encoding(words, self.dim).astype(embedded.dtype), axis=-2)


RECALL_PAIRS = 4


def recall_batch(model: NTMReader, rng: np.random.Generator, size: int) -> dict[str, np.ndarray]:
    """Associative recall of one of 4 key-value pairs over the model's vocabulary."""
    return tasks.associative_recall(rng, size, RECALL_PAIRS, model.embed.num_embeddings)


register(ModelSpec(
    name="ntm",
    factory=NTMReader,
    inputs=lambda model: dict(keys=Input(("B", RECALL_PAIRS), "int64"), values=Input(("B", RECALL_PAIRS), "int64"),
                              query=Input(("B",), "int64")),
    batch=recall_batch,
    loss=lambda model, keys, values, query, target: F.cross_entropy(model(keys, values, query), target),
    defaults=dict(vocab=16, embed_dim=16, memory_dim=32, hidden=32),
    tiny=dict(vocab=10, embed_dim=8, memory_dim=8, hidden=8),
    description="Neural Turing Machine read head (Graves et al. 2014): content addressing with sharpening "
                "on associative recall",
))

SENTENCES, STORY = 6, dict(people=3, rooms=4)


def story_batch(model: MemN2N, rng: np.random.Generator, size: int) -> dict[str, np.ndarray]:
    """bAbI-like whereabouts stories (``tasks.whereabouts``) of up to 6 sentences about 3 people in 4 rooms."""
    vocab, needed = model.embeddings[0].num_embeddings, tasks.story_words(**STORY)
    if vocab < needed:
        raise DataError(f"the whereabouts task needs a vocabulary of at least {needed} words, the model has {vocab}")
    return tasks.whereabouts(rng, size, SENTENCES, **STORY)


register(ModelSpec(
    name="memn2n",
    factory=MemN2N,
    inputs=lambda model: dict(story=Input(("B", SENTENCES, tasks.FACT_WORDS), "int64"),
                              question=Input(("B", tasks.FACT_WORDS), "int64")),
    batch=story_batch,
    loss=lambda model, story, question, answer: F.cross_entropy(model(story, question), answer),
    defaults=dict(vocab=16, dim=32, hops=3, memory_size=8, linear_map=False),
    tiny=dict(dim=8, hops=2),
    description="End-to-end memory network (Sukhbaatar et al. 2015), K hops with adjacent tying, on "
                "bAbI-like whereabouts stories",
))
