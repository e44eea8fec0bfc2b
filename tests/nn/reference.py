"""NumPy references (float64) of the formulas the layers and models implement, written from the papers
with the modules' parameters, for the tests to compare against."""
import numpy as np


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def linear(layer, x):
    y = x @ layer.weight.data.astype(np.float64)
    return y if layer.bias is None else y + layer.bias.data


def softmax(x, mask=None):
    """Over the last axis and the entries ``mask`` allows; a row with none allowed is all zeros."""
    allowed = np.ones(x.shape, bool) if mask is None else np.broadcast_to(mask, x.shape)
    e = np.where(allowed, np.exp(x - np.where(allowed, x, -np.inf).max(-1, keepdims=True)), 0)
    total = e.sum(-1, keepdims=True)
    return e / np.where(total > 0, total, 1)


def layer_norm(x, norm):
    return (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + norm.eps) * norm.weight.data \
        + norm.bias.data


def gru_cell(cell, x, h):
    """r = σ(W_r x + U_r h), z = σ(W_z x + U_z h), n = tanh(W_n x + r ∘ U_n h), h' = (1 − z) n + z h."""
    (x_r, x_z, x_n), (h_r, h_z, h_n) = np.split(linear(cell.input, x), 3, -1), np.split(linear(cell.hidden, h), 3, -1)
    r, z = sigmoid(x_r + h_r), sigmoid(x_z + h_z)
    n = np.tanh(x_n + r * h_n)
    return (1 - z) * n + z * h


def lstm_cell(cell, x, h, c):
    """Gates i, f, g, o from W x + U h + b; c' = f c + i g, h' = o tanh(c')."""
    i, f, g, o = np.split(linear(cell.input, x) + linear(cell.hidden, h), 4, -1)
    c = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
    return sigmoid(o) * np.tanh(c), c


def split_heads(x, heads):
    """(B, T, d) -> (B, h, T, d/h)."""
    b, t, d = x.shape
    return x.reshape(b, t, heads, d // heads).transpose(0, 2, 1, 3)


def multi_head_attention(mha, query, key, value, mask=None, relative=None):
    """softmax(q kᵀ/√d_h) v per head, merged and projected; ``relative`` = (a_K, a_V) (Tq, Tk, d_h) adds
    Shaw et al.'s terms e_ij += q_i·a^K_ij / √d_h and z_i += Σ_j α_ij a^V_ij. ``mask`` broadcasts to
    (B, h, Tq, Tk)."""
    q, k, v = (split_heads(linear(w, x), mha.heads) for w, x in [(mha.w_q, query), (mha.w_k, key), (mha.w_v, value)])
    scores = q @ k.swapaxes(-1, -2)
    if relative is not None:
        scores = scores + np.einsum("bhid,ijd->bhij", q, relative[0])
    weights = softmax(scores / np.sqrt(q.shape[-1]), mask)
    z = weights @ v
    if relative is not None:
        z = z + np.einsum("bhij,ijd->bhid", weights, relative[1])
    b, h, t, dh = z.shape
    return linear(mha.w_o, z.transpose(0, 2, 1, 3).reshape(b, t, h * dh))
