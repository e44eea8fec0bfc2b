"""Small seeded synthetic tasks that give every registered model a batch to learn from.

Each needs one of the mechanisms of its model: reversal needs attention to the mirrored source position,
counting needs the previous tokens, keyword detection needs attention pooling to find one token, the
quadrant task needs patches compared across the image.
"""
from __future__ import annotations

import numpy as np

from ..core import functional as F
from ..nn.checks import integer
from .tokens import BOS, EOS, FIRST, PAD, pad, vocabulary


def reversal(rng: np.random.Generator, size: int, length: int, vocab: int) -> dict[str, np.ndarray]:
    """Sequence reversal with padding: src = x₁ … x_n (1 ≤ n ≤ length, ordinary tokens < vocab),
    tgt_in = BOS x_n … x₁ and tgt_out = x_n … x₁ EOS, each padded to length + 1."""
    vocab = vocabulary("vocab", vocab)
    sources = [rng.integers(FIRST, vocab, rng.integers(1, length + 1)) for _ in range(size)]
    return dict(src=pad(sources, length),
                tgt_in=pad([[BOS, *s[::-1]] for s in sources], length + 1),
                tgt_out=pad([[*s[::-1], EOS] for s in sources], length + 1))


def reversal_batch(length: int):
    """The registry's ``batch(model, rng, size)`` for an encoder-decoder (with ``src_embed`` and
    ``tgt_embed``): reversal of sources up to ``length`` tokens drawn from both vocabularies."""
    def batch(model, rng: np.random.Generator, size: int) -> dict[str, np.ndarray]:
        return reversal(rng, size, length, min(model.src_embed.num_embeddings, model.tgt_embed.num_embeddings))
    return batch


def reversal_loss(model, src, tgt_in, tgt_out):
    """Teacher forcing: mean cross-entropy of each next target token over the real (non-PAD) targets."""
    return F.cross_entropy(model(src, tgt_in), tgt_out, ignore_index=PAD)


def counting(rng: np.random.Generator, size: int, length: int, vocab: int) -> np.ndarray:
    """(size, length) rows a, a + s, a + 2s, … over the ordinary tokens (wrapping around below vocab),
    with random start a and step s ∈ {1, 2, 3}: every token follows from the two before it."""
    span = vocabulary("vocab", vocab) - FIRST
    start = rng.integers(0, span, (size, 1))
    step = rng.integers(1, 4, (size, 1))
    return FIRST + (start + step * np.arange(length)) % span


KEYWORD = FIRST


def words(rng: np.random.Generator, length: int, vocab: int) -> np.ndarray:
    """1 … length random ordinary tokens other than the keyword (so vocab > KEYWORD + 1)."""
    return rng.integers(KEYWORD + 1, integer("vocab", vocab, minimum=KEYWORD + 2), rng.integers(1, length + 1))


def plant_keyword(rng: np.random.Generator, rows: list[np.ndarray]) -> None:
    """Put the keyword at a random position of one of ``rows``."""
    row = rows[rng.integers(len(rows))]
    row[rng.integers(len(row))] = KEYWORD


def keyword_sequences(rng: np.random.Generator, size: int, length: int,
                      vocab: int) -> tuple[np.ndarray, np.ndarray]:
    """Padded rows of 1 … length ordinary tokens, and labels: 1 when the row holds the keyword (half of
    them, at a random place), else 0. Returns tokens (size, length) and labels (size,)."""
    labels = rng.integers(0, 2, size)
    rows = [words(rng, length, vocab) for _ in labels]
    for row, label in zip(rows, labels):
        if label:
            plant_keyword(rng, [row])
    return pad(rows, length), labels


def keyword_batch(length: int):
    """The registry's ``batch(model, rng, size)`` for a sentence classifier (with an ``embed`` layer): tokens
    (size, length) and labels from ``keyword_sequences`` over the model's vocabulary."""
    def batch(model, rng: np.random.Generator, size: int) -> dict[str, np.ndarray]:
        tokens, labels = keyword_sequences(rng, size, length, model.embed.num_embeddings)
        return dict(tokens=tokens, labels=labels)
    return batch


def keyword_documents(rng: np.random.Generator, size: int, sentences: int, length: int,
                      vocab: int) -> tuple[np.ndarray, np.ndarray]:
    """Documents of 1 … ``sentences`` sentences of 1 … ``length`` tokens, padded to (size, sentences,
    length), and labels: 1 when one of the sentences holds the keyword (half of them), else 0."""
    labels = rng.integers(0, 2, size)
    documents = np.full((size, sentences, length), PAD, np.int64)
    for document, label in zip(documents, labels):
        rows = [words(rng, length, vocab) for _ in range(rng.integers(1, sentences + 1))]
        if label:
            plant_keyword(rng, rows)
        document[:len(rows)] = pad(rows, length)
    return documents, labels


def quadrant_images(rng: np.random.Generator, size: int, channels: int,
                    image_size: int) -> tuple[np.ndarray, np.ndarray]:
    """Noisy float32 images (size, channels, image_size, image_size) with one brighter quadrant, and the
    index of that quadrant (0-3, row by row) as the label."""
    labels = rng.integers(0, 4, size)
    images = (0.5 * rng.standard_normal((size, channels, image_size, image_size))).astype(np.float32)
    half = image_size // 2
    for image, label in zip(images, labels):
        row, column = divmod(label, 2)
        image[:, row * half:(row + 1) * half, column * half:(column + 1) * half] += 1
    return images, labels


def associative_recall(rng: np.random.Generator, size: int, pairs: int, vocab: int) -> dict[str, np.ndarray]:
    """Key-value recall: ``pairs`` distinct ordinary key tokens and a random ordinary value for each, keys and
    values (size, pairs); a query (size,) that is one of the row's keys, and the target (size,), its value."""
    span = integer("vocab", vocab, minimum=FIRST + integer("pairs", pairs)) - FIRST
    keys = FIRST + np.argsort(rng.random((size, span)), axis=1)[:, :pairs]
    values = rng.integers(FIRST, vocab, (size, pairs))
    chosen = rng.integers(0, pairs, size)
    rows = np.arange(size)
    return dict(keys=keys, values=values, query=keys[rows, chosen], target=values[rows, chosen])


WHERE, IS, IN = FIRST, FIRST + 1, FIRST + 2
FACT_WORDS = 4


def story_words(people: int, rooms: int) -> int:
    """The vocabulary size that ``whereabouts`` stories need: the ids up to IN, then the people and rooms."""
    return IN + 1 + people + rooms


def whereabouts(rng: np.random.Generator, size: int, sentences: int, people: int,
                rooms: int) -> dict[str, np.ndarray]:
    """A bAbI-like story task (Weston et al. 2015, task 1): a story of 1 … ``sentences`` facts "p is in r",
    each the 4 words [p, IS, IN, r], padded with empty sentences to (size, sentences, 4); the question
    "where is p" (size, 4) about a person of the story; the answer (size,) is the room of the last fact
    about p. People are the word ids IN + 1 …, rooms the ``rooms`` ids after them."""
    people, rooms = integer("people", people), integer("rooms", rooms)
    story = np.full((size, integer("sentences", sentences), FACT_WORDS), PAD, np.int64)
    question = np.full((size, FACT_WORDS), PAD, np.int64)
    answer = np.empty(size, np.int64)
    for i in range(size):
        n = rng.integers(1, sentences + 1)
        who = IN + 1 + rng.integers(0, people, n)
        where = IN + 1 + people + rng.integers(0, rooms, n)
        story[i, :n] = np.stack([who, np.full(n, IS), np.full(n, IN), where], axis=1)
        asked = rng.integers(n)
        question[i, :3] = WHERE, IS, who[asked]
        answer[i] = where[who == who[asked]][-1]
    return dict(story=story, question=question, answer=answer)


def sorting(rng: np.random.Generator, size: int, length: int) -> dict[str, np.ndarray]:
    """Numbers to sort (size, length) uniform in [0, 1) (float32), and the permutation (size, length) that
    sorts each row ascending: the positions of its smallest, second smallest, … number."""
    numbers = rng.random((size, integer("length", length))).astype(np.float32)
    return dict(numbers=numbers, order=np.argsort(numbers, axis=1, kind="stable"))
