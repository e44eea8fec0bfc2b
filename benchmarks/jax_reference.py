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

from attngraph.models.show_attend_tell import PENALTY
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


def _lstm_cell(p: dict, x, state):
    """attngraph's LSTMCell (one bias, the input's): i, f, g, o = W x + b + U h, c' = σ(f) ∘ c + σ(i) ∘ tanh(g),
    h' = σ(o) ∘ tanh(c')."""
    h, c = state
    i, f, g, o = jnp.split(_affine(p["input"], x) + _affine(p["hidden"], h), 4, -1)
    c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
    return jax.nn.sigmoid(o) * jnp.tanh(c), c


def _unroll(cell, p: dict, x, mask=None, reverse: bool = False, state=None):
    """``cell`` (``_gru_cell``, state h, or ``_lstm_cell``, state (h, c)) scanned over x (B, T, in) from
    ``state`` (zeros by default), from the end when ``reverse``; with a ``mask`` (B, T), a padded step (False)
    carries the state over and outputs zero. The outputs h (B, T, H) in time order and the final state."""
    if state is None:
        h = jnp.zeros((x.shape[0], p["hidden"]["weight"].shape[0]), x.dtype)
        state = (h, h) if cell is _lstm_cell else h

    def step(state, inputs):
        x_t, real = inputs
        new = cell(p, x_t, state)
        if real is not None:
            new = jax.tree.map(lambda n, old: jnp.where(real[:, None], n, old), new, state)
        h = new[0] if isinstance(new, tuple) else new
        return new, h if real is None else h * real[:, None]
    final, states = jax.lax.scan(step, state, (x.swapaxes(0, 1), None if mask is None else mask.T), reverse=reverse)
    return states.swapaxes(0, 1), final


def _bidirectional(p: dict, x, mask):
    """attngraph's bidirectional GRU: ([h→_t; h←_t] (B, T, 2H), the final states [h→; h←])."""
    forward, last = _unroll(_gru_cell, p["cell"], x, mask)
    backward, first = _unroll(_gru_cell, p["backward_cell"], x, mask, reverse=True)
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


def _last_real(states, mask):
    """Each row's state at its last real step (padding only at the end of a row): (B, T, H), (B, T) → (B, H)."""
    return states[jnp.arange(len(states)), mask.sum(1) - 1]


def seq2seq_luong_logits(p: dict, src, tgt_in):
    """attngraph's LuongSeq2Seq (score "general"): the encoder GRU scanned over the masked sources, the decoder
    GRU, fed only the target embeddings, scanned from its final state; then attention for every step at once,
    α = softmax(h_t W_a h̄ᵀ) over the real source tokens, logits = W_s tanh(W_c [c_t; h_t])."""
    mask = src != PAD
    memory, final = _unroll(_gru_cell, p["encoder"]["cell"], p["src_embed"]["weight"][src], mask)
    states, _ = _unroll(_gru_cell, p["cell"], p["tgt_embed"]["weight"][tgt_in], state=final)
    scores = states @ p["attention"]["score"]["weight"] @ memory.swapaxes(1, 2)
    weights = jax.nn.softmax(jnp.where(mask[:, None], scores, jnp.finfo(scores.dtype).min))
    return _affine(p["out"], jnp.tanh(_affine(p["attentional"], jnp.concatenate([weights @ memory, states], -1))))


def seq2seq_luong_loss(p: dict, src, tgt_in, tgt_out):
    return _cross_entropy(seq2seq_luong_logits(p, src, tgt_in), tgt_out, ignore_index=PAD)


def _lstmn(p: dict, x, mask):
    """attngraph's LSTMN, scanned with its tape (B, T, ·) in the carry, written at each step: at step t,
    s = softmax(vᵀ tanh(W_h h_i + b + W_x x_t + W_h̃ h̃_{t−1})) over i < t (none at t = 0: zero summaries),
    [h̃_t; c̃_t] = Σ_i s_i [h_i; c_i], (h_t, c_t) = LSTMCell(x_t, (h̃_t, c̃_t)). Padding only at the end of a
    row: a real step attends only to real ones; the output is each row's h at its last real step."""
    batch, length, _ = x.shape
    hidden, attention = p["cell"]["hidden"]["weight"].shape[0], p["v"].shape[0]

    def step(carry, inputs):
        summary, keys, tape = carry
        t, x_t, query_x = inputs
        scores = jnp.tanh(keys + (query_x + summary @ p["w_summary"]["weight"])[:, None]) @ p["v"]
        summary, c_summary = jnp.split(_attend(scores, tape, jnp.arange(length) < t), 2, -1)
        h, c = _lstm_cell(p["cell"], x_t, (summary, c_summary))
        return (summary, keys.at[:, t].set(_affine(p["w_h"], h)), tape.at[:, t].set(jnp.concatenate([h, c], -1))), h
    carry = (jnp.zeros((batch, hidden), x.dtype), jnp.zeros((batch, length, attention), x.dtype),
             jnp.zeros((batch, length, 2 * hidden), x.dtype))
    _, states = jax.lax.scan(step, carry, (jnp.arange(length), x.swapaxes(0, 1),
                                           (x @ p["w_x"]["weight"]).swapaxes(0, 1)))
    return _last_real(states.swapaxes(0, 1), mask)


def lstmn_loss(p: dict, tokens, labels):
    return _cross_entropy(_affine(p["classifier"], _lstmn(p["lstmn"], p["embed"]["weight"][tokens], tokens != PAD)),
                          labels)


def elmo_logits(p: dict, tokens):
    """attngraph's ELMo biLM: each direction's LSTM layers scanned over the masked tokens (the backward ones
    from the end), each reading the one below; one softmax layer."""
    mask = tokens != PAD

    def language_model(cells: dict, reverse: bool):
        x = p["embed"]["weight"][tokens]
        for layer in sorted(cells, key=int):
            x, _ = _unroll(_lstm_cell, cells[layer], x, mask, reverse)
        return _affine(p["softmax"], x)
    return language_model(p["forward_lm"]["cells"], False), language_model(p["backward_lm"]["cells"], True)


def elmo_loss(p: dict, tokens):
    forward_logits, backward_logits = elmo_logits(p, tokens)
    return (_cross_entropy(forward_logits[:, :-1], tokens[:, 1:], ignore_index=PAD)
            + _cross_entropy(backward_logits[:, 1:], tokens[:, :-1], ignore_index=PAD))


def _conv_relu(p: dict, x):
    """relu(conv2d(x, W, padding 1) + b), NCHW."""
    y = jax.lax.conv_general_dilated(x, p["weight"], (1, 1), ((1, 1), (1, 1)),
                                     dimension_numbers=("NCHW", "OIHW", "NCHW"))
    return jax.nn.relu(y + p["bias"][:, None, None])


def _max_pool(x):
    """2 × 2 max pooling, stride 2, NCHW."""
    return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")


def show_attend_tell_logits(p: dict, images, captions_in):
    """attngraph's soft ShowAttendTell: annotations a = CNN(images) + P, (h_0, c_0) = tanh(f(ā)); each step,
    scanned, α = softmax(vᵀ tanh(W_a a + b + W_h h)), z = σ(f_β(h)) Σ α a, (h, c) = LSTM([E y; z], (h, c));
    the deep output L_o tanh(E y + L_h h + L_z z) of all steps at once. Returns logits and α (B, T, L)."""
    encoder, score = p["encoder"], p["score"]
    features = _max_pool(_max_pool(_conv_relu(encoder["3"], _max_pool(_conv_relu(encoder["0"], images)))))
    annotations = features.reshape(*features.shape[:2], -1).swapaxes(1, 2) + p["positions"]["weight"]
    mean = annotations.mean(1)
    keys, embedded = _affine(score["w_key"], annotations), p["embed"]["weight"][captions_in]

    def step(state, word):
        h = state[0]
        alpha = jax.nn.softmax(jnp.tanh(_affine(score["w_query"], h)[:, None] + keys) @ score["v"])
        z = jax.nn.sigmoid(_affine(p["gate"], h)) * jnp.einsum("bl,bld->bd", alpha, annotations)
        state = _lstm_cell(p["cell"], jnp.concatenate([word, z], -1), state)
        return state, (state[0], z, alpha)
    state = jnp.tanh(_affine(p["init_h"], mean)), jnp.tanh(_affine(p["init_c"], mean))
    _, (h, z, alpha) = jax.lax.scan(step, state, embedded.swapaxes(0, 1))
    h, z, alpha = (v.swapaxes(0, 1) for v in (h, z, alpha))
    return _affine(p["out"], jnp.tanh(embedded + _affine(p["out_h"], h) + _affine(p["out_z"], z))), alpha


def show_attend_tell_loss(p: dict, images, captions_in, captions_out):
    """The words' mean cross-entropy + λ mean_b Σ_i (1 − Σ_t α_ti)² over the real words (attngraph's soft
    ``objective``)."""
    logits, alpha = show_attend_tell_logits(p, images, captions_in)
    attended = (alpha * (captions_out != PAD)[..., None]).sum(1)
    return _cross_entropy(logits, captions_out, ignore_index=PAD) + PENALTY * ((1 - attended) ** 2).sum(-1).mean()


def pointer_log_p(p: dict, numbers, order):
    """attngraph's PointerNetwork under teacher forcing: the decoder's inputs (start, then the embedded inputs
    in the target order) known beforehand, encoder and decoder LSTMs each one scan, every step's pointer
    u_ij = vᵀ tanh(W1 e_j + b + W2 d_i) one (B, n, n) array; log p over the positions not yet pointed at."""
    z = _affine(p["embed"], numbers[..., None])
    states, final = _unroll(_lstm_cell, p["encoder"]["cell"], z)
    start = jnp.broadcast_to(p["start"], (len(z), 1, z.shape[-1]))
    decoded, _ = _unroll(_lstm_cell, p["decoder"], jnp.concatenate(
        [start, jnp.take_along_axis(z, order[:, :-1, None], 1)], 1), state=final)
    score = p["pointer"]
    scores = jnp.tanh(_affine(score["w_query"], decoded)[:, :, None] + _affine(score["w_key"], states)[:, None]) \
        @ score["v"]
    chosen = jax.nn.one_hot(order, numbers.shape[1], dtype=jnp.int32)
    pointed = jnp.cumsum(chosen, 1) - chosen > 0
    return jax.nn.log_softmax(jnp.where(pointed, jnp.finfo(scores.dtype).min, scores))


def pointer_loss(p: dict, numbers, order):
    """The mean over steps and rows of −log p(C_i = order_i)."""
    return -jnp.take_along_axis(pointer_log_p(p, numbers, order), order[..., None], -1).mean()
