"""Show, Attend and Tell (Xu et al. 2015, "Neural Image Caption Generation with Visual Attention").

A CNN turns the picture into a grid of L = h·w annotation vectors a_1 … a_L (D features each); an LSTM
writes the caption one word at a time, and before each word it attends over the grid (§3.1.2, §4):

    h_0 = tanh(f_init,h(ā)),  c_0 = tanh(f_init,c(ā)),  ā = (1/L) Σ_i a_i       initial state
    e_ti = f_att(a_i, h_{t−1}) = vᵀ tanh(W_a a_i + W_h h_{t−1} + b)            the attention MLP
    α_t  = softmax(e_t)                                                         over the L locations
    β_t  = σ(f_β(h_{t−1}))                                                      gating scalar (§4.2.1)
    z_t  = β_t Σ_i α_ti a_i             soft: the expectation of the context  (§4.2)
    z_t  = β_t a_s̃,  s̃ ~ Multinoulli(α_t)  hard: one sampled location         (§4.1)
    h_t, c_t = LSTM([E y_{t−1}; z_t], (h_{t−1}, c_{t−1}))
    p(y_t) = softmax(L_o tanh(E y_{t−1} + L_h h_t + L_z z_t))                   deep output layer (eq. 7)

The deep output's tanh is that of the authors' code (arctic-captions); equation 7 leaves it out. The soft
model minimizes −log p(y | a) + λ Σ_i (1 − Σ_t α_ti)², the doubly stochastic penalty (eq. 14), which asks
every location to be attended about once over the caption. The hard model samples s̃ by the Gumbel-max
trick, s̃ = argmax_i (e_ti + g_ti) with g_ti ~ Gumbel(0, 1) given as an input (``gumbel_noise``), which
draws from softmax(e_t) exactly, inside the graph: every step's sample feeds the next state, so the
caption's T samples are drawn in one run. It is trained by REINFORCE (``attention.hard``): the reward is
R = log p(y | s̃, a), the moving-average baseline b is fed as an input, and an entropy bonus keeps the
attention exploring (eq. 12). At inference the hard model reads the most likely location (zero noise).
The paper's other variance reduction, the expectation in place of the sample half the time, is left out.
REINFORCE's estimate is no derivative of the loss's value, so the registered loss (``check-grads``) leaves it
out (``objective(..., reinforce=False)``); its direction is tested on its own.

Departures from the paper, for small pictures: the encoder is two 3 × 3 convolutions, each followed by
a ReLU and 2 × 2 max pooling, and a third pooling (a 24 × 24 picture gives 3 × 3 locations), and a learned vector per location (``LearnedPositions``) is added to the annotations, so that
a word can say *where* the attended shape is (VGG's large receptive fields carry that in the paper).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..attention import AdditiveScore, LearnedPositions, reinforce_loss
from ..attention.hard import one_hot
from ..core import functional as F
from ..core.api import trace
from ..core.tracing import Input
from ..errors import ShapeError
from ..nn import Activation, Embedding, Linear, LSTMCell, Module, Sequential
from ..nn.checks import divisible, flag, integer, non_negative, sizes
from ..nn.conv import Conv2d, MaxPool2d
from . import captions
from .registry import ModelSpec, register
from .tokens import PAD, greedy, vocabulary

PENALTY = 0.01          # λ of the doubly stochastic penalty (the paper: 1, for 196 locations)
ENTROPY = 0.01          # λ_e of the hard model's entropy bonus


class Decoding(NamedTuple):
    """A teacher-forced decoding: logits (B, T, V), α (B, T, L), β (B, T), and the hard model's sampled
    locations s̃ (B, T) (None for the soft model)."""
    logits: object
    alpha: object
    beta: object
    locations: object


class ShowAttendTell(Module):
    """logits, alpha = ShowAttendTell(...)(images, captions_in, noise=None): pictures (B, 3, S, S) and the
    teacher-forced captions ``<s> y_1 … y_{T−1}`` (B, T) → word logits (B, T, vocab) and the attention
    α (B, T, L) over the L = (S/8)² locations, row by row (module docstring). ``hard=True`` reads one
    location per word, drawn with the Gumbel ``noise`` (B, T, L); without noise, the most likely one.

    ``channels`` are the two convolutions' widths (the second is D); S must be a multiple of 8; T may be
    symbolic (the decoder is one ``scan``). The weights of all steps, (B, T, L), are recorded as ``attention``."""

    def __init__(self, vocab: int = captions.VOCAB, image_size: int = 24, channels: tuple = (16, 32),
                 embed_dim: int = 32, hidden: int = 64, attention_dim: int = 32, hard: bool = False, rng=None):
        super().__init__()
        vocab = vocabulary("vocab", vocab)
        self.image_size = divisible("image_size", integer("image_size", image_size), "three 2 × 2 poolings", 8)
        if not isinstance(channels, (tuple, list)) or len(channels) != 2:
            raise ValueError(f"channels must be the widths of the two convolutions, got {channels!r}")
        first, features = sizes(channels_0=channels[0], channels_1=channels[1])
        embed_dim, hidden, attention_dim = sizes(embed_dim=embed_dim, hidden=hidden, attention_dim=attention_dim)
        self.hard = flag("hard", hard)
        self.locations = (self.image_size // 8) ** 2
        self.encoder = Sequential(Conv2d(3, first, 3, padding=1, rng=rng), Activation(F.relu), MaxPool2d(2),
                                  Conv2d(first, features, 3, padding=1, rng=rng), Activation(F.relu), MaxPool2d(2),
                                  MaxPool2d(2))
        self.positions = LearnedPositions(self.locations, features, rng=rng)
        self.init_h = Linear(features, hidden, rng=rng)
        self.init_c = Linear(features, hidden, rng=rng)
        self.embed = Embedding(vocab, embed_dim, rng=rng)
        self.score = AdditiveScore(hidden, features, attention_dim, rng=rng)
        self.gate = Linear(hidden, 1, rng=rng)
        self.cell = LSTMCell(embed_dim + features, hidden, rng=rng)
        self.out_h = Linear(hidden, embed_dim, rng=rng)
        self.out_z = Linear(features, embed_dim, bias=False, rng=rng)
        self.out = Linear(embed_dim, vocab, rng=rng)

    def encode(self, images):
        """The annotations a (B, L, D): the CNN's feature map, location by location, plus their positions."""
        if len(images.shape) != 4 or tuple(images.shape[1:]) != (3, self.image_size, self.image_size):
            raise ShapeError(f"images must be (B, 3, {self.image_size}, {self.image_size}) RGB pictures of the model's "
                             f"image_size, got shape {images.shape}")
        features = self.encoder(images)
        batch, channels, height, width = features.shape
        grid = F.swapaxes(F.reshape(features, (batch, channels, height * width)), 1, 2)
        return self.positions(grid)

    def initial_state(self, annotations):
        """(h_0, c_0) from the mean annotation."""
        mean = F.mean(annotations, axis=1)
        return F.tanh(self.init_h(mean)), F.tanh(self.init_c(mean))

    def attend(self, state, annotations, noise=None):
        """One word's read of the picture from h_{t−1}: (z_t (B, D), α_t (B, L), β_t (B, 1), the read weights
        (α_t, or the hard model's one-hot s̃_t)); ``noise`` (B, L) is the hard model's Gumbel noise."""
        h, _ = state
        scores = self.score(F.expand_dims(h, 1), annotations)[:, 0]          # e_t (B, L)
        alpha = F.name(F.softmax(scores), "attention")
        read = F.astype(one_hot(gumbel_max(scores, 0.0 if noise is None else noise), alpha), alpha.dtype) \
            if self.hard else alpha
        beta = F.sigmoid(self.gate(h))
        return beta * (F.expand_dims(read, 1) @ annotations)[:, 0], alpha, beta, read

    def logits(self, embedded, h, z):
        """The deep output L_o tanh(E y_{t−1} + L_h h_t + L_z z_t), for one step (B, ·) or all (B, T, ·)."""
        return self.out(F.tanh(embedded + self.out_h(h) + self.out_z(z)))

    def step(self, y_prev, state, annotations, noise=None):
        """One word: (logits (B, V), (h_t, c_t), α_t (B, L), β_t (B, 1), s̃_t (B,) or None) from the previous
        word (B,), state and the annotations (B, L, D); ``noise`` (B, L) is the hard model's Gumbel noise."""
        z, alpha, beta, read = self.attend(state, annotations, noise)
        embedded = self.embed(y_prev)
        state = self.cell(F.concat([embedded, z], axis=-1), state)
        return (self.logits(embedded, state[0], z), state, alpha, beta,
                F.argmax(read, -1) if self.hard else None)

    def decode(self, images, captions_in, noise=None) -> Decoding:
        """Teacher forcing over every position of ``captions_in`` (B, T); ``noise`` (B, T, L) for the hard model.
        One scan over the embedded words (and the noise) carrying (h, c) and emitting h_t, z_t, α_t, β_t (and
        the one-hot s̃_t); the deep output runs after it, on all T steps at once."""
        annotations = self.encode(images)
        sampled = self.hard and noise is not None

        def step(state, inputs):
            embedded, noise_t = inputs if sampled else (inputs, None)
            z, alpha, beta, read = self.attend(state, annotations, noise_t)
            state = self.cell(F.concat([embedded, z], axis=-1), state)
            return state, (state[0], z, alpha, beta, read)

        embedded = self.embed(captions_in)
        _, (h, z, alpha, beta, read) = F.scan(step, self.initial_state(annotations),
                                              (embedded, noise) if sampled else embedded)
        return Decoding(self.logits(embedded, h, z), F.name(alpha, "attention"), beta[..., 0],
                        F.argmax(read, -1) if self.hard else None)

    def forward(self, images, captions_in, noise=None):
        decoding = self.decode(images, captions_in, noise)
        return decoding.logits, decoding.alpha

    def greedy_decode(self, images: np.ndarray, max_length: int) -> tuple[np.ndarray, np.ndarray]:
        """Caption tokens (B, n ≤ max_length) of ``images`` by greedy decoding (``tokens.greedy``; the hard
        model reads the most likely location), and the attention of every step (B, n, L). The encoder and
        one step are each traced and compiled once; the state is carried between step calls."""
        images = np.asarray(images, np.float32)
        max_length = integer("max_length", max_length)

        def start(images):
            annotations = self.encode(images)
            return (annotations, *self.initial_state(annotations))

        def one_step(y, h, c, annotations):
            logits, (h, c), alpha, *_ = self.step(y, (h, c), annotations)
            return logits, h, c, alpha

        annotations, *state = trace(start, images=images).compile()(images=images)
        step = trace(one_step, y=Input((len(images),), "int64"), h=state[0], c=state[1],
                     annotations=annotations).compile()
        weights = []

        def next_logits(prefix):
            nonlocal state
            logits, *state, alpha = step(y=prefix[:, -1], h=state[0], c=state[1], annotations=annotations)
            weights.append(alpha)
            return logits

        tokens = greedy(next_logits, len(images), max_length)
        return tokens, np.stack(weights, axis=1)


def gumbel_max(scores, noise):
    """s̃ = argmax_i (e_i + g_i) over the last axis, int64: with g_i ~ Gumbel(0, 1), a draw from softmax(e)
    (the Gumbel-max trick); with g = 0, the most likely location. No gradient flows through the choice."""
    return F.argmax(F.stop_gradient(scores) + noise, -1)


def gumbel_noise(rng: np.random.Generator, shape) -> np.ndarray:
    """g = −log(−log u), u ~ U(0, 1): float32 Gumbel(0, 1) noise of ``shape``, for the hard model."""
    return -np.log(-np.log(rng.uniform(np.finfo(np.float32).tiny, 1.0, shape))).astype(np.float32)


def doubly_stochastic_penalty(alpha, real):
    """mean over the batch of Σ_i (1 − Σ_t α_ti)², the sum over t taking the real (non-padding) words:
    ``alpha`` (B, T, L), ``real`` (B, T) bool."""
    attended = F.sum(F.where(F.expand_dims(real, -1), alpha, 0.0), 1)
    return F.mean(F.sum((1 - attended) ** 2, -1))


def caption_log_likelihood(logits, captions_out):
    """log p(y | ·) = Σ_t log softmax(logits_t)[y_t] over the real words of each caption: (B,)."""
    log_p = F.log_softmax(logits)
    words = F.sum(F.where(one_hot(captions_out, log_p), log_p, 0.0), -1)
    return F.sum(F.where(F.not_equal(captions_out, PAD), words, 0.0), -1)


def objective(model: ShowAttendTell, images, captions_in, captions_out, noise=None, baseline=0.0,
              penalty: float = PENALTY, entropy: float = ENTROPY, reinforce: bool = True) -> dict:
    """{"loss": ...} for the soft model: the mean cross-entropy of the caption's words plus ``penalty`` times
    the doubly stochastic penalty. The hard model's loss has the same value, and (``reinforce``) its gradient
    adds REINFORCE's (``reinforce_loss`` with R = log p(y | s̃, a) for every word's sample, the ``baseline`` b
    and the ``entropy`` weight): its surrogate enters as s − stop_gradient(s), which adds 0. It also returns
    "reward", the batch's mean R, for the baseline b ← 0.9 b + 0.1 R (``MovingAverageBaseline``).
    ``reinforce=False`` leaves that estimate out: what remains is the gradient of the loss for the locations
    the noise chose, the one finite differences can check."""
    decoding = model.decode(images, captions_in, noise)
    real = F.not_equal(captions_out, PAD)
    loss = (F.cross_entropy(decoding.logits, captions_out, ignore_index=PAD)
            + non_negative("penalty", penalty) * doubly_stochastic_penalty(decoding.alpha, real))
    if decoding.locations is None or not flag("reinforce", reinforce):
        return {"loss": loss}
    reward = caption_log_likelihood(decoding.logits, captions_out)
    per_word = F.where(real, F.expand_dims(reward, -1), baseline)          # padding's samples carry no signal
    surrogate = reinforce_loss(decoding.alpha, decoding.locations, per_word, baseline,
                               non_negative("entropy", entropy))
    return {"loss": loss + surrogate - F.stop_gradient(surrogate), "reward": F.mean(reward)}


def batch(model: ShowAttendTell, rng: np.random.Generator, size: int) -> dict[str, np.ndarray]:
    """Pictures of one to three shapes and their captions (``captions.batch``); the hard model's Gumbel
    noise and a baseline of 0."""
    data = captions.batch(rng, size, model.image_size)
    if model.hard:
        data.update(noise=gumbel_noise(rng, (*data["captions_in"].shape, model.locations)),
                    baseline=np.float32(0.0))
    return data


def inputs(model: ShowAttendTell) -> dict:
    length = captions.caption_length(3)
    noise = dict(noise=Input(("B", length, model.locations))) if model.hard else {}
    return dict(images=Input(("B", 3, model.image_size, model.image_size)),
                captions_in=Input(("B", length), "int64"), **noise)


SETTINGS = dict(vocab=captions.VOCAB, image_size=24, channels=(16, 32), embed_dim=32, hidden=64, attention_dim=32)
TINY = dict(channels=(4, 8), embed_dim=8, hidden=8, attention_dim=8)

for name, hard, description in [
        ("show-attend-tell", False, "soft attention: captions pictures of coloured shapes"),
        ("show-attend-tell-hard", True, "hard attention trained by REINFORCE")]:
    register(ModelSpec(
        name=name,
        factory=lambda hard=hard, **settings: ShowAttendTell(hard=hard, **settings),
        inputs=inputs,
        batch=batch,
        loss=lambda model, **b: objective(model, **b, reinforce=False)["loss"],
        defaults=SETTINGS,
        tiny=TINY,
        description=f"Show, Attend and Tell (Xu et al. 2015), {description}",
    ))
