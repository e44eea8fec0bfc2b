"""A synthetic captioning task: generated pictures of coloured shapes, and captions naming them.

A picture (3, S, S), black, is cut into a ``grid`` × ``grid`` board of cells (S / grid pixels each); one to
``max_objects`` shapes sit in distinct cells, each a square, circle, triangle or cross of one of four
colours, a little off the cell's centre. Its caption names every shape in reading order (cells row by row,
left to right) by colour, kind and cell, and ends in ``</s>``:

    "red circle top-left blue cross center </s>"

so every word is read at one place of the picture: the place a model has to attend to. Everything follows
from the generator given, so a seed fixes the pictures. Token ids follow ``models.tokens`` (0-3 special,
``WORDS`` lists every id's word); captions are padded with ``PAD`` to ``caption_length(max_objects)``.
"""
from __future__ import annotations

import numpy as np

from ..errors import DataError
from ..nn.checks import integer
from .tokens import BOS, EOS, PAD, pad

COLOURS = {"red": (1.0, 0.15, 0.1), "green": (0.1, 0.85, 0.2), "blue": (0.2, 0.4, 1.0), "yellow": (1.0, 0.9, 0.1)}
KINDS = ("square", "circle", "triangle", "cross")
PLACES = ("top-left", "top", "top-right", "left", "center", "right", "bottom-left", "bottom", "bottom-right")
WORDS = ("<pad>", "<s>", "</s>", "<mask>", *COLOURS, *KINDS, *PLACES)
VOCAB = len(WORDS)
WORDS_PER_OBJECT = 3        # colour, kind, place


def caption_length(max_objects: int) -> int:
    """Tokens in the longest caption: three words per object and ``</s>``."""
    return WORDS_PER_OBJECT * max_objects + 1


def shape_mask(kind: str, size: int, dy: float, dx: float) -> np.ndarray:
    """(size, size) bool: the pixels a ``kind`` covers in a cell of ``size`` pixels, centred (dy, dx) pixels
    off the cell's centre, with a radius of 0.4 cell."""
    y, x = np.mgrid[:size, :size] + 0.5 - size / 2
    y, x, r = y - dy, x - dx, 0.4 * size
    if kind == "square":
        return (abs(y) <= r) & (abs(x) <= r)
    if kind == "circle":
        return y ** 2 + x ** 2 <= r ** 2 + 0.5
    if kind == "triangle":                                 # apex up
        return (abs(y) <= r) & (abs(x) <= (y + r) / 2 + 0.5)
    return ((abs(y) <= r) & (abs(x) <= r / 3)) | ((abs(x) <= r) & (abs(y) <= r / 3))     # cross


def sample(rng: np.random.Generator, size: int, image_size: int = 24, grid: int = 3,
           max_objects: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """``size`` pictures, float32 (size, 3, image_size, image_size) in [0, 1], and their captions, int64
    (size, caption_length(max_objects)): the words of each object in reading order, ``</s>``, ``PAD``.
    ``grid`` must be 3 (the place words name a 3 × 3 board) and ``image_size`` a multiple of it of at least
    6 pixels per cell; ``max_objects`` at most 9."""
    size = integer("size", size)
    if integer("grid", grid) != 3:
        raise DataError(f"the captions name places on a 3 × 3 grid, so grid must be 3, got {grid}")
    if integer("image_size", image_size) % grid or image_size // grid < 6:
        raise DataError(f"image_size must be a multiple of {grid} of at least {6 * grid} pixels, got {image_size}")
    max_objects = integer("max_objects", max_objects, maximum=grid * grid)
    cell = image_size // grid
    colours = np.array(list(COLOURS.values()), np.float32)
    images = np.zeros((size, 3, image_size, image_size), np.float32)
    captions = []
    for image in images:
        count = rng.integers(1, max_objects + 1)
        places = np.sort(rng.choice(grid * grid, count, replace=False))        # reading order
        colour, kind = rng.integers(len(COLOURS), size=count), rng.integers(len(KINDS), size=count)
        offsets = rng.uniform(-cell / 8, cell / 8, (count, 2))
        words = []
        for place, c, k, (dy, dx) in zip(places, colour, kind, offsets):
            row, column = divmod(place, grid)
            mask = shape_mask(KINDS[k], cell, dy, dx)
            image[:, row * cell:(row + 1) * cell, column * cell:(column + 1) * cell][:, mask] = colours[c][:, None]
            words += [WORDS.index(list(COLOURS)[c]), WORDS.index(KINDS[k]), WORDS.index(PLACES[place])]
        captions.append(words + [EOS])
    return images, pad(captions, caption_length(max_objects))


def batch(rng: np.random.Generator, size: int, image_size: int = 24, max_objects: int = 3) -> dict[str, np.ndarray]:
    """``sample``'s pictures as ``images`` with teacher forcing's ``captions_in`` (``<s>`` and every word but
    the last) and ``captions_out`` (the caption)."""
    images, captions = sample(rng, size, image_size, max_objects=max_objects)
    captions_in = np.concatenate([np.full((size, 1), BOS), captions[:, :-1]], axis=1)
    return dict(images=images, captions_in=captions_in, captions_out=captions)


def decode(tokens) -> str:
    """The words of ``tokens`` up to and including the first ``</s>`` (padding and ``<s>`` dropped)."""
    words = []
    for token in np.asarray(tokens).tolist():
        if token not in (PAD, BOS):
            words.append(WORDS[token])
        if token == EOS:
            break
    return " ".join(words)


def evaluate(tokens: np.ndarray, alpha: np.ndarray, targets: np.ndarray) -> dict:
    """How well captions decoded as ``tokens`` (B, n) with attention ``alpha`` (B, n, L) match ``targets``
    (B, T): exact captions, words in place (a target's words and ``</s>``, each against the decoded word at its
    position), and how often a word of a right caption attends most to its shape's cell."""
    decoded = np.full(targets.shape, PAD)
    decoded[:, :tokens.shape[1]] = tokens
    real = targets != PAD
    exact = np.all((decoded == targets) | ~real, axis=1)
    grid = int(np.sqrt(alpha.shape[-1]))
    row, column = np.divmod(np.argmax(alpha, -1), grid)
    looked_at = row // (grid // 3) * 3 + column // (grid // 3)        # (B, n): the cell of the grid of shapes
    first_place = WORDS.index(PLACES[0])
    on_shape = []
    for i in np.flatnonzero(exact):
        words = np.flatnonzero(targets[i] > EOS)
        places = targets[i, words // WORDS_PER_OBJECT * WORDS_PER_OBJECT + 2] - first_place
        on_shape.extend(looked_at[i, words] == places)
    return {"heldout_exact_match": float(np.mean(exact)),
            "heldout_token_accuracy": float(np.sum((decoded == targets) & real) / np.sum(real)),
            "heldout_attention_on_shape": float(np.mean(on_shape)) if on_shape else 0.0}
