"""The JAX side of the benchmarks, written as a JAX user would: nanoGPT's loss and gradients one ``jax.jit`` of
``jax.value_and_grad``; BahdanauSeq2Seq's and HAN's training steps (forward, backward, AdamW) one ``jax.jit``
function compiled by XLA, parameters and optimizer state donated so that XLA updates them in place, the recurrences
``lax.scan`` loops. The GRU models take attngraph's parameters, nested by their dotted names (``tree``). Imported
only when JAX is installed (the ``bench`` extra)."""
from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from attngraph.models.tokens import PAD

LAYER_NORM_EPS = 1e-5


def _layer_norm(x, w, b):
    mean = x.mean(-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(variance + LAYER_NORM_EPS) * w + b


def nanogpt_loss(params: dict, tokens, targets, heads: int):
    """nanoGPT's model as a JAX user writes it over benchmarks.gpt.init's parameters (matrices (in, out)): one
    projection c_attn viewed (B, T, 3, H, d/H), whose q, k, v ``jax.nn.dot_product_attention`` reads in that
    (B, T, H, d/H) layout; GELU's tanh form; logits = ln_f(x) wteᵀ (tied); mean cross-entropy."""
    b, t = tokens.shape
    x = params["transformer.wte.weight"][tokens] + params["transformer.wpe.weight"][:t]
    layers = sum(name.endswith(".ln_1.weight") for name in params)
    for i in range(layers):
        def p(name):
            return params[f"transformer.h.{i}.{name}"]
        h = _layer_norm(x, p("ln_1.weight"), p("ln_1.bias"))
        qkv = (h @ p("attn.c_attn.weight") + p("attn.c_attn.bias")).reshape(b, t, 3, heads, -1)
        y = jax.nn.dot_product_attention(qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2], is_causal=True)
        x = x + y.reshape(b, t, -1) @ p("attn.c_proj.weight") + p("attn.c_proj.bias")
        h = _layer_norm(x, p("ln_2.weight"), p("ln_2.bias"))
        x = x + jax.nn.gelu(h @ p("mlp.c_fc.weight") + p("mlp.c_fc.bias"), approximate=True) \
            @ p("mlp.c_proj.weight") + p("mlp.c_proj.bias")
    x = _layer_norm(x, params["transformer.ln_f.weight"], params["transformer.ln_f.bias"])
    return _cross_entropy(x @ params["transformer.wte.weight"].T, targets)


def nanogpt_value_and_grad(heads: int):
    """``jax.jit(jax.value_and_grad(nanogpt_loss))`` for ``heads`` heads: (params, tokens, targets) → (loss, grads)."""
    return jax.jit(jax.value_and_grad(partial(nanogpt_loss, heads=heads)))


def nanogpt_step(params: dict[str, np.ndarray], heads: int, tokens: np.ndarray, targets: np.ndarray):
    """The loss and all gradients, one jitted function, as a function of nothing (it waits for XLA's result).
    float64 parameters run with ``jax.enable_x64`` (JAX's arrays are float32 without it)."""
    x64 = next(iter(params.values())).dtype == np.float64
    step = nanogpt_value_and_grad(heads)
    with jax.enable_x64(x64):
        params, tokens, targets = jax.tree.map(jnp.asarray, (params, tokens, targets))

    def run():
        with jax.enable_x64(x64):
            return jax.block_until_ready(step(params, tokens, targets))
    return run


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
