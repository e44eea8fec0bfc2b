"""The JAX side of the benchmarks: attngraph's GPT, BahdanauSeq2Seq and HAN training steps written as a JAX
user would, the whole step (forward, backward, AdamW) one ``jax.jit`` function compiled by XLA, parameters and
optimizer state donated so that XLA updates them in place; the recurrences are ``lax.scan`` loops. The GRU
models take attngraph's parameters, nested by their dotted names (``tree``). Imported only when JAX is
installed (the ``bench`` extra)."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from attngraph.models.tokens import PAD

LAYER_NORM_EPS = 1e-5


def _linear(rng: np.random.Generator, fan_in: int, fan_out: int) -> dict:
    bound = 1 / np.sqrt(fan_in)
    return {"w": rng.uniform(-bound, bound, (fan_in, fan_out)).astype(np.float32),
            "b": np.zeros(fan_out, np.float32)}


def _norm(width: int) -> dict:
    return {"w": np.ones(width, np.float32), "b": np.zeros(width, np.float32)}


def init(rng: np.random.Generator, vocab: int, width: int, layers: int, length: int) -> dict:
    """attngraph's GPT: token and position embeddings, pre-norm layers (q, k, v, o, up, down), final norm."""
    return {"tokens": (0.02 * rng.standard_normal((vocab, width))).astype(np.float32),
            "positions": (0.02 * rng.standard_normal((length, width))).astype(np.float32),
            "layers": [{"attention_norm": _norm(width), "mlp_norm": _norm(width),
                        **{name: _linear(rng, width, width) for name in ("q", "k", "v", "o")},
                        "up": _linear(rng, width, 4 * width), "down": _linear(rng, 4 * width, width)}
                       for _ in range(layers)],
            "norm": _norm(width)}


def _apply(p: dict, x):
    return x @ p["w"] + p["b"]


def _layer_norm(p: dict, x):
    mean = x.mean(-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(variance + LAYER_NORM_EPS) * p["w"] + p["b"]


def forward(params: dict, tokens, heads: int):
    """Next-token logits (B, T, vocab), logits = h Eᵀ with the token embedding E (tied)."""
    b, t = tokens.shape
    x = params["tokens"][tokens] + params["positions"][:t]
    for layer in params["layers"]:
        h = _layer_norm(layer["attention_norm"], x)
        q, k, v = (_apply(layer[name], h).reshape(b, t, heads, -1) for name in ("q", "k", "v"))
        attended = jax.nn.dot_product_attention(q, k, v, is_causal=True).reshape(b, t, -1)
        x = x + _apply(layer["o"], attended)
        x = x + _apply(layer["down"], jax.nn.gelu(_apply(layer["up"], _layer_norm(layer["mlp_norm"], x)),
                                                  approximate=True))
    return _layer_norm(params["norm"], x) @ params["tokens"].T


def _cross_entropy(logits, targets, ignore_index: int | None = None):
    """Mean over the targets other than ``ignore_index`` of −log softmax(logits)[target]."""
    nll = -jnp.take_along_axis(jax.nn.log_softmax(logits), targets[..., None], -1)[..., 0]
    if ignore_index is None:
        return nll.mean()
    real = targets != ignore_index
    return (nll * real).sum() / real.sum()


def _adamw(params, grads, m, v, count, lr=3e-4, b1=0.9, b2=0.999, eps=1e-8, weight_decay=0.01):
    """torch.optim.AdamW's update, as attngraph's: θ ← θ(1 − ηλ) − η m̂ / (√v̂ + ε)."""
    m = jax.tree.map(lambda m, g: b1 * m + (1 - b1) * g, m, grads)
    v = jax.tree.map(lambda v, g: b2 * v + (1 - b2) * g * g, v, grads)
    correction1, correction2 = 1 - b1 ** count, 1 - b2 ** count
    params = jax.tree.map(lambda p, m, v: p * (1 - lr * weight_decay)
                          - lr * (m / correction1) / (jnp.sqrt(v / correction2) + eps), params, m, v)
    return params, m, v


def gpt_step(vocab, width, heads, layers, tokens: np.ndarray, targets: np.ndarray):
    """One jitted AdamW training step of the next-token cross-entropy, as a function of nothing."""
    def loss(params, tokens, targets):
        return _cross_entropy(forward(params, tokens, heads), targets)
    return training_step(loss, init(np.random.default_rng(0), vocab, width, layers, tokens.shape[1]), tokens, targets)


def training_step(loss, params, *batch: np.ndarray):
    """One jitted AdamW training step of ``loss(params, *batch)`` from ``params``, as a function of nothing (it
    waits for XLA's result)."""
    params = jax.tree.map(jnp.asarray, params)
    state = {"params": params, "m": jax.tree.map(jnp.zeros_like, params),
             "v": jax.tree.map(jnp.zeros_like, params), "count": 0}
    batch = [jnp.asarray(array) for array in batch]

    def update(params, m, v, count):
        return _adamw(params, jax.grad(loss)(params, *batch), m, v, count)
    step = jax.jit(update, donate_argnums=(0, 1, 2))

    def run():
        state["count"] += 1
        state["params"], state["m"], state["v"] = step(state["params"], state["m"], state["v"], state["count"])
        jax.block_until_ready(state["params"])
    return run


def tree(state: dict[str, np.ndarray]) -> dict:
    """attngraph's ``state_dict()`` as nested dicts: {"encoder": {"cell": {"input": {"weight": ...}}}}."""
    nested = {}
    for name, value in state.items():
        *path, leaf = name.split(".")
        node = nested
        for key in path:
            node = node.setdefault(key, {})
        node[leaf] = value
    return nested


def _affine(p: dict, x):
    """attngraph's Linear, weight (in, out): x W + b."""
    y = x @ p["weight"]
    return y + p["bias"] if "bias" in p else y


def _gru_cell(p: dict, x, h):
    """attngraph's GRUCell (PyTorch's form): r, z = σ(W x + b + U h + c), n = tanh(W_n x + b_n + r ∘ (U_n h + c_n)),
    h' = (1 − z) ∘ n + z ∘ h."""
    x_r, x_z, x_n = jnp.split(_affine(p["input"], x), 3, -1)
    h_r, h_z, h_n = jnp.split(_affine(p["hidden"], h), 3, -1)
    r, z = jax.nn.sigmoid(x_r + h_r), jax.nn.sigmoid(x_z + h_z)
    return (1 - z) * jnp.tanh(x_n + r * h_n) + z * h


def _unroll(p: dict, x, mask, reverse: bool):
    """A GRU cell scanned over x (B, T, in), from the end when ``reverse``; a padded step (mask False) carries
    the state over and outputs zero. The states (B, T, H) in time order and the final state."""
    def step(h, inputs):
        x_t, real = inputs
        h = jnp.where(real[:, None], _gru_cell(p, x_t, h), h)
        return h, h * real[:, None]
    h = jnp.zeros((x.shape[0], p["hidden"]["weight"].shape[0]), x.dtype)
    final, states = jax.lax.scan(step, h, (x.swapaxes(0, 1), mask.T), reverse=reverse)
    return states.swapaxes(0, 1), final


def _bidirectional(p: dict, x, mask):
    """attngraph's bidirectional GRU: ([h→_t; h←_t] (B, T, 2H), the final states [h→; h←])."""
    forward, last = _unroll(p["cell"], x, mask, reverse=False)
    backward, first = _unroll(p["backward_cell"], x, mask, reverse=True)
    return jnp.concatenate([forward, backward], -1), jnp.concatenate([last, first], -1)


def _attend(scores, values, mask):
    """Σ_j α_j values_j, α = softmax(scores) over the keys ``mask`` allows, zero where it allows none."""
    weights = jax.nn.softmax(jnp.where(mask, scores, jnp.finfo(scores.dtype).min)) * mask
    return jnp.einsum("bt,btd->bd", weights, values)


def seq2seq_logits(p: dict, src, tgt_in):
    """attngraph's BahdanauSeq2Seq with teacher forcing: s_0 = tanh(W h←_1), then each decoder step, scanned,
    c = Σ softmax(vᵀ tanh(W s + U h)) h, s = GRU([E y; c], s), logits = W_o tanh(U_o [s; c; E y])."""
    mask = src != PAD
    memory, final = _bidirectional(p["encoder"], p["src_embed"]["weight"][src], mask)
    state = jnp.tanh(_affine(p["bridge"], final[:, final.shape[1] // 2:]))
    score = p["attention"]["score"]
    keys = _affine(score["w_key"], memory)

    def step(state, embedded):
        context = _attend(jnp.tanh(_affine(score["w_query"], state)[:, None] + keys) @ score["v"], memory, mask)
        state = _gru_cell(p["cell"], jnp.concatenate([embedded, context], -1), state)
        readout = jnp.tanh(_affine(p["readout"], jnp.concatenate([state, context, embedded], -1)))
        return state, _affine(p["out"], readout)
    _, logits = jax.lax.scan(step, state, p["tgt_embed"]["weight"][tgt_in].swapaxes(0, 1))
    return logits.swapaxes(0, 1)


def seq2seq_loss(p: dict, src, tgt_in, tgt_out):
    return _cross_entropy(seq2seq_logits(p, src, tgt_in), tgt_out, ignore_index=PAD)


def _pool(p: dict, hidden, mask):
    """attngraph's AttentionPooling: Σ_t α_t h_t, α = softmax(u_wᵀ tanh(W h_t + b)) over the real t."""
    return _attend(_affine(p["w_s2"], jnp.tanh(_affine(p["w_s1"], hidden)))[..., 0], hidden, mask)


def han_logits(p: dict, documents):
    """attngraph's HAN: words, then sentences, each read by a bidirectional GRU and pooled by attention, both
    levels masked (a sentence is padding when its first word is)."""
    batch, sentences, words = documents.shape
    tokens = documents.reshape(-1, words)
    word_mask = tokens != PAD
    word_states, _ = _bidirectional(p["word_encoder"], p["embed"]["weight"][tokens], word_mask)
    vectors = _pool(p["word_attention"], word_states, word_mask).reshape(batch, sentences, -1)
    sentence_mask = documents[:, :, 0] != PAD
    sentence_states, _ = _bidirectional(p["sentence_encoder"], vectors, sentence_mask)
    return _affine(p["classifier"], _pool(p["sentence_attention"], sentence_states, sentence_mask))


def han_loss(p: dict, documents, labels):
    return _cross_entropy(han_logits(p, documents), labels)
