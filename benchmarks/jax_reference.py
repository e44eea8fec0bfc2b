"""The JAX side of the benchmarks: attngraph's GPT training step written as a JAX user would, the whole
step (forward, backward, AdamW) one ``jax.jit`` function compiled by XLA, parameters and optimizer state
donated so that XLA updates them in place. Imported only when JAX is installed (the ``bench`` extra)."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

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


def _loss(params: dict, tokens, targets, heads: int):
    log_p = jax.nn.log_softmax(forward(params, tokens, heads))
    return -jnp.take_along_axis(log_p, targets[..., None], -1).mean()


def _adamw(params, grads, m, v, count, lr=3e-4, b1=0.9, b2=0.999, eps=1e-8, weight_decay=0.01):
    """torch.optim.AdamW's update, as attngraph's: θ ← θ(1 − ηλ) − η m̂ / (√v̂ + ε)."""
    m = jax.tree.map(lambda m, g: b1 * m + (1 - b1) * g, m, grads)
    v = jax.tree.map(lambda v, g: b2 * v + (1 - b2) * g * g, v, grads)
    correction1, correction2 = 1 - b1 ** count, 1 - b2 ** count
    params = jax.tree.map(lambda p, m, v: p * (1 - lr * weight_decay)
                          - lr * (m / correction1) / (jnp.sqrt(v / correction2) + eps), params, m, v)
    return params, m, v


def gpt_step(vocab, width, heads, layers, tokens: np.ndarray, targets: np.ndarray):
    """One jitted AdamW training step, as a function of nothing (it waits for XLA's result)."""
    params = jax.tree.map(jnp.asarray, init(np.random.default_rng(0), vocab, width, layers, tokens.shape[1]))
    state = {"params": params, "m": jax.tree.map(jnp.zeros_like, params),
             "v": jax.tree.map(jnp.zeros_like, params), "count": 0}
    tokens, targets = jnp.asarray(tokens), jnp.asarray(targets)

    def update(params, m, v, count):
        return _adamw(params, jax.grad(_loss)(params, tokens, targets, heads), m, v, count)
    step = jax.jit(update, donate_argnums=(0, 1, 2))

    def run():
        state["count"] += 1
        state["params"], state["m"], state["v"] = step(state["params"], state["m"], state["v"], state["count"])
        jax.block_until_ready(state["params"])
    return run
