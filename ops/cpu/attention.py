"""Scaled dot-product attention, fused: softmax(s·QKᵀ + bias, mask) V without ever holding a Tq × Tk matrix.

q (..., Tq, d), k (..., Tk, d), v (..., Tk, dv) with one batch shape, seen as N = prod(...) independent
(batch, head) pairs; s is the scale (1/√d by default); the optional float bias broadcasts to (..., Tq, Tk)
(ALiBi's (H, Tq, Tk), a (B, 1, 1, Tk) padding bias; read as distinct rows, never expanded). Key j takes part
for query i when the mask allows it (True = may attend; the mask broadcasts to (..., Tq, Tk)) and, when
causal, when j ≤ i + Tk − Tq (bottom-right aligned). A query with no key taking part, or whose biases are all
−inf, gets output 0 and sends gradient 0 everywhere; never NaN (PyTorch gives NaN for the −inf row).

Per query tile Qₜ (BQ = 64 rows), over the key chunks K_c, V_c (BK keys each) that the tile may see, with
Z_c = s·Qₜ K_cᵀ + bias_c:

  forward:   E_c = exp(Z_c − m) (0 where masked),  l = Σ_c rowsum E_c,  Oₜ = (Σ_c E_c V_c) / l
  backward:  E_c and l recomputed as above,  D = rowsum(dOₜ ∘ Oₜ),  P_c = E_c / l
             dV_c += P_cᵀ dOₜ,  dZ_c = P_c ∘ (dOₜ V_cᵀ − D),  dQₜ = s·Σ_c dZ_c K_c,  dK_c += s·dZ_cᵀ Qₜ,
             d bias = dZ (``attention_bias_backward``, full (..., Tq, Tk): autodiff sums it over broadcast axes)

with m the row maximum of the scores; 1/l scales rows of Oₜ, dOₜ and dS instead of the Tq × Tk entries.
The softmax is exact per tile rather than online (Dao et al.'s running maximum and rescaling): a tile
keeps its BQ × Tk exponentials in a per-thread buffer (1 MiB at Tk = 4096), so the backward recomputes
them bit for bit from Q and K and needs neither the log-sum-exp nor a second output of the forward.
Memory is that buffer per thread, plus the O(N·T·d) inputs and outputs; causal tiles skip the keys past
their last query's diagonal.

NaN and Inf, as in PyTorch's softmax, per query: a NaN or +inf among the scores a query sees makes its
output row NaN, and every gradient through its probabilities. Its m is then NaN (``mathfn.softmax_shift``),
so is every E entry it sees while those it does not see stay 0, and its 1/l and D are taken as 0: the NaN
travels in E alone, and the keys it does not see get nothing from it. A masked-out score changes nothing,
whatever its value (PyTorch's composed attention turns a NaN there into a NaN row). A NaN in q, k or v
itself still reaches, through the products, gradients of keys and queries that do not see it, and a NaN in
v outputs of queries that do not see it, as 0 · NaN = NaN (PyTorch's too). The kernels use
``mathfn.FASTMATH``, which keeps IEEE NaN and Inf: under fastmath=True a NaN score could vanish.

Products go through BLAS (np.dot inside numba) one chunk at a time: BQ·BK·max(d, dv) ≤ 2**18
multiply-adds keeps OpenBLAS on the calling thread, so threads share the tiles (forward: the (n, tile)
pairs; backward: the n, each thread owning its dK and dV) without oversubscribing the cores (a larger
product would start OpenBLAS's threads from every tile, and run many times slower). The threads are Python
threads running ``nogil`` kernels (``threads.in_threads``), which compile faster than prange loops. BLAS reads
the chunks of K and V in place, transposed; a tile's last chunk ends at its last query's last key.
"""
import math

import numpy as np
from numba import njit

from ops.cpu import mathfn
from ops.cpu.layout import broadcast_rows, mask_rows
from ops.cpu.threads import in_threads

_BQ = 64                 # queries per tile
_BLAS_SERIAL_MAX = 2 ** 18       # multiply-adds: OpenBLAS runs a product this small on the calling thread


def extras(extra) -> tuple:
    """(mask, bias) among the optional inputs of the ``attention`` primitives after q, k, v (graph nodes or
    arrays): the boolean one is the mask, the floating one the bias; None for one that is absent."""
    mask = [x for x in extra if x.dtype == np.bool_]
    bias = [x for x in extra if x.dtype != np.bool_]
    return (mask or [None])[0], (bias or [None])[0]


def kernel_args(extra, causal, scale) -> tuple:
    """The arguments of the attention kernels (CPU and CUDA) after q, k, v, from the primitive's optional inputs
    and attributes: (mask, causal, scale, bias)."""
    mask, bias = extras(extra)
    return mask, causal, scale, bias


def attention(q, k, v, mask=None, causal=False, scale=None, bias=None):
    """softmax(scale · q kᵀ + bias) v over the allowed keys, for q (..., Tq, d), k (..., Tk, d), v (..., Tk, dv)
    with one batch shape and a mask and a bias broadcasting to (..., Tq, Tk); scale defaults to 1/√d."""
    q, k, v, masking, scale, bk = _prepare(q, k, v, mask, causal, scale, bias)
    tq, dv = q.shape[-2], v.shape[-1]
    q3, k3, v3 = _flat(q), _flat(k), _flat(v)
    o = np.zeros(q3.shape[:2] + (dv,), q.dtype)
    tiles = (tq + _BQ - 1) // _BQ
    in_threads(_forward_tiles, len(q3) * tiles, q3, k3, v3, o, *masking, scale, bk, np.finfo(q.dtype).min,
               work=q.size)
    return o.reshape(q.shape[:-1] + (dv,))


def attention_backward(g, o, q, k, v, mask=None, causal=False, scale=None, bias=None):
    """The gradients of ``attention`` for the output gradient g, from its output o, stacked in one array
    (3, ..., max(Tq, Tk), max(d, dv)) that is 0 outside them:

      dq = grads[0, ..., :Tq, :d],  dk = grads[1, ..., :Tk, :d],  dv = grads[2, ..., :Tk, :dv]

    (one array, so that a graph node can hold all three; for self-attention each is a contiguous view)."""
    (tq, d), (tk, dv) = q.shape[-2:], v.shape[-2:]
    grads = np.zeros((3, math.prod(q.shape[:-2]), max(tq, tk), max(d, dv)), q.dtype)
    _backward(g, o, q, k, v, mask, causal, scale, bias, grads[0, :, :tq, :d], grads[1, :, :tk, :d],
              grads[2, :, :tk, :dv], np.zeros((0, tq, tk), grads.dtype))
    return grads.reshape((3,) + q.shape[:-2] + grads.shape[2:])


def attention_bias_backward(g, o, q, k, v, mask=None, causal=False, scale=None, bias=None):
    """The gradient of ``attention`` with respect to its bias, dZ = P ∘ (g vᵀ − rowsum(g ∘ o)), at the full
    shape of the scores (..., Tq, Tk): 0 where a key takes no part."""
    (tq, d), (tk, dv) = q.shape[-2:], v.shape[-2:]
    dz = np.zeros((math.prod(q.shape[:-2]), tq, tk), q.dtype)
    none = np.zeros((0, tq, max(d, dv)), dz.dtype)
    _backward(g, o, q, k, v, mask, causal, scale, bias, none[..., :d], none[..., :d], none[..., :dv], dz)
    return dz.reshape(q.shape[:-1] + (tk,))


def _backward(g, o, q, k, v, mask, causal, scale, bias, dq, dk, dv, dz):
    """Run ``_backward_heads`` over the (batch, head) pairs in threads."""
    q, k, v, masking, scale, bk = _prepare(q, k, v, mask, causal, scale, bias)
    g, o = (np.ascontiguousarray(a, q.dtype) for a in (g, o))
    in_threads(_backward_heads, math.prod(q.shape[:-2]), _flat(q), _flat(k), _flat(v), _flat(g), _flat(o), dq, dk,
               dv, dz, *masking, scale, bk, np.finfo(q.dtype).min, work=q.size)


def _prepare(q, k, v, mask, causal, scale, bias):
    """Contiguous operands, (mask rows, mask index, bias rows, bias index, causal), the scale in q's dtype, the
    key chunk size."""
    q, k, v = (np.ascontiguousarray(a) for a in (q, k, v))
    if q.ndim < 2 or k.shape[:-2] != q.shape[:-2] or k.shape[-1] != q.shape[-1] or v.shape[:-1] != k.shape[:-1] \
            or not q.dtype == k.dtype == v.dtype:
        raise ValueError(f"attention needs q (..., Tq, d), k (..., Tk, d), v (..., Tk, dv) of one batch shape and "
                         f"dtype; got {q.shape} {q.dtype}, {k.shape} {k.dtype}, {v.shape} {v.dtype}")
    d, dv = q.shape[-1], v.shape[-1]
    scale = q.dtype.type(1 / math.sqrt(d) if scale is None else scale)
    bk = max(8, min(256, _BLAS_SERIAL_MAX // (_BQ * max(d, dv, 1)), k.shape[-2]))   # buffers no wider than Tk
    scores = q.shape[:-1] + k.shape[-2:-1]
    bias = np.zeros(scores[-1:], q.dtype) if bias is None else np.asarray(bias, q.dtype)
    return q, k, v, (*mask_rows(mask, scores), *broadcast_rows(bias, scores, "bias"), causal), scale, bk


def _flat(a):
    """(..., T, features) as (N, T, features)"""
    return a.reshape((math.prod(a.shape[:-2]),) + a.shape[-2:])


@njit(cache=True)
def _key_end(i, tq, tk, causal):
    """Query i may see keys j < end: all tk, or j <= i + tk - tq when causal."""
    return min(max(i + 1 + tk - tq, 0), tk) if causal else tk


@njit(fastmath=mathfn.FASTMATH, cache=True)
def _add(total, part):
    """total += part, for 2-D arrays of one shape"""
    for i in range(part.shape[0]):
        for j in range(part.shape[1]):
            total[i, j] += part[i, j]


@njit(fastmath=mathfn.FASTMATH, cache=True)
def _exponentials(q, k, end, first, tq, tk, allowed_rows, allowed_index, bias_rows, bias_index, causal, scale,
                  lowest, bk, e, inverse):
    """The unnormalized softmax of the query tile q (rows × d) — queries first, first + 1, ... of tq — over
    the first ``end`` of the tk keys k (tk × d), in chunks:
    e = exp(z − row max) for z = scale · q kᵀ + bias, 0 where a key takes no part, written chunk by chunk
    (e[c, :rows · w] is the rows × w block of keys c·bk ≤ j < c·bk + w, w = min(bk, end − c·bk)), and
    inverse = 1 / rowsum(e) (0 for a row with no key, and for a NaN row, whose e is NaN where it sees a key).
    Returns the number of chunks."""
    rows, d = q.shape
    chunks = (end + bk - 1) // bk
    zero = e.dtype.type(0)
    m = np.full(rows, lowest, e.dtype)
    for c in range(chunks):
        j0 = c * bk
        w = min(bk, end - j0)
        s = e[c, :rows * w].reshape((rows, w))
        np.dot(q, k[j0:j0 + w].T, s)
        for r in range(rows):
            allowed, stop = allowed_rows[allowed_index[r]][j0:], min(w, _key_end(first + r, tq, tk, causal) - j0)
            bias, row_max = bias_rows[bias_index[r]][j0:], m[r]
            for j in range(stop):
                s[r, j] = s[r, j] * scale + bias[j]
                row_max = mathfn.maximum(row_max, s[r, j] if allowed[j] else lowest)
            m[r] = row_max
    for r in range(rows):
        inverse[r], m[r] = zero, mathfn.softmax_shift(m[r])
    for c in range(chunks):
        j0 = c * bk
        w = min(bk, end - j0)
        s = e[c, :rows * w].reshape((rows, w))
        for r in range(rows):
            allowed, stop = allowed_rows[allowed_index[r]][j0:], min(w, _key_end(first + r, tq, tk, causal) - j0)
            row_max, total = m[r], zero
            for j in range(max(stop, 0)):
                x = mathfn.exp(s[r, j] - row_max) if allowed[j] else zero
                s[r, j] = x
                total += x
            for j in range(max(stop, 0), w):
                s[r, j] = zero
            inverse[r] += total
    for r in range(rows):
        inverse[r] = e.dtype.type(1) / inverse[r] if inverse[r] > zero else zero
    return chunks


@njit(nogil=True, fastmath=mathfn.FASTMATH, cache=True)
def _forward_tiles(start, stop, q, k, v, o, allowed_rows, allowed_index, bias_rows, bias_index, causal, scale, bk,
                   lowest):
    """o[n, i] = Σ_j e[n, i, j] v[n, j] / Σ_j e[n, i, j] for the (n, query tile) pairs start ≤ t < stop"""
    tq, tk, dv = q.shape[1], v.shape[1], v.shape[2]
    tiles = (tq + _BQ - 1) // _BQ
    e = np.empty(((k.shape[1] + bk - 1) // bk, _BQ * bk), q.dtype)
    inverse, part = np.empty(_BQ, q.dtype), np.empty((_BQ, dv), q.dtype)
    for t in range(start, stop):
        n, i0 = t // tiles, (t % tiles) * _BQ
        i1 = min(i0 + _BQ, tq)
        rows, end = i1 - i0, _key_end(i1 - 1, tq, tk, causal)
        if end == 0:
            continue
        rows_of = slice(n * tq + i0, n * tq + i1)
        chunks = _exponentials(q[n, i0:i1], k[n], end, i0, tq, tk, allowed_rows, allowed_index[rows_of], bias_rows,
                               bias_index[rows_of], causal, scale, lowest, bk, e, inverse)
        for c in range(chunks):
            j0 = c * bk
            w = min(bk, end - j0)
            np.dot(e[c, :rows * w].reshape((rows, w)), v[n, j0:j0 + w], part[:rows])
            _add(o[n, i0:i1], part[:rows])
        for r in range(rows):
            for f in range(dv):
                o[n, i0 + r, f] *= inverse[r]


@njit(fastmath=mathfn.FASTMATH, cache=True)
def _tile_deltas(g, o, inverse, delta, g_scaled):
    """For a query tile's output gradient g and output o: delta = rowsum(g ∘ o) (0 for a row with no key and for
    a NaN row, whose NaN is in e) and g_scaled = g / l."""
    zero = g.dtype.type(0)
    for r in range(g.shape[0]):
        total = zero
        for f in range(g.shape[1]):
            total += g[r, f] * o[r, f]
            g_scaled[r, f] = g[r, f] * inverse[r]
        delta[r] = total if inverse[r] != zero else zero


@njit(fastmath=mathfn.FASTMATH, cache=True)
def _score_grads(ec, dp, inverse, delta, factor, out):
    """out = factor · P ∘ (dp − delta) for a chunk's exponentials ec (P = ec / l, rows × w)"""
    for r in range(ec.shape[0]):
        f = factor * inverse[r]
        for j in range(ec.shape[1]):
            out[r, j] = f * ec[r, j] * (dp[r, j] - delta[r])


@njit(nogil=True, fastmath=mathfn.FASTMATH, cache=True)
def _backward_heads(start, stop, q, k, v, g, o, dq, dk, dv, dz, allowed_rows, allowed_index, bias_rows, bias_index,
                    causal, scale, bk, lowest):
    """For the pairs start ≤ n < stop, dq, dk, dv (zeros on entry) += the gradients when they are given (not
    empty), and dz = P ∘ (dO Vᵀ − D) when it is. With P = e / l: dV += eᵀ (dO / l) and
    dS = scale · dZ = (scale / l) · e ∘ (dO Vᵀ − D)."""
    tq, d = q.shape[1:]
    tk, dvalue = k.shape[1], v.shape[2]
    weights, scores = dq.shape[0] > 0, dz.shape[0] > 0
    e = np.empty(((tk + bk - 1) // bk, _BQ * bk), q.dtype)
    ds = np.empty(_BQ * bk, q.dtype)
    dq_part, dk_part, dv_part = np.empty((_BQ, d), q.dtype), np.empty((bk, d), q.dtype), np.empty((bk, dvalue), q.dtype)
    inverse, delta, g_scaled = np.empty(_BQ, q.dtype), np.empty(_BQ, q.dtype), np.empty((_BQ, dvalue), q.dtype)
    for n in range(start, stop):
        for i0 in range(0, tq, _BQ):
            i1 = min(i0 + _BQ, tq)
            rows, end = i1 - i0, _key_end(i1 - 1, tq, tk, causal)
            if end == 0:
                continue
            rows_of = slice(n * tq + i0, n * tq + i1)
            chunks = _exponentials(q[n, i0:i1], k[n], end, i0, tq, tk, allowed_rows, allowed_index[rows_of], bias_rows,
                                   bias_index[rows_of], causal, scale, lowest, bk, e, inverse)
            _tile_deltas(g[n, i0:i1], o[n, i0:i1], inverse, delta, g_scaled)
            for c in range(chunks):
                j0 = c * bk
                w = min(bk, end - j0)
                ec = e[c, :rows * w].reshape((rows, w))
                dsc = ds[:rows * w].reshape((rows, w))
                np.dot(g[n, i0:i1], v[n, j0:j0 + w].T, dsc)
                if scores:
                    _score_grads(ec, dsc, inverse, delta, q.dtype.type(1), dz[n, i0:i1, j0:j0 + w])
                if weights:
                    np.dot(ec.T, g_scaled[:rows], dv_part[:w])
                    _add(dv[n, j0:j0 + w], dv_part[:w])
                    _score_grads(ec, dsc, inverse, delta, scale, dsc)
                    np.dot(dsc, k[n, j0:j0 + w], dq_part[:rows])
                    _add(dq[n, i0:i1], dq_part[:rows])
                    np.dot(dsc.T, q[n, i0:i1], dk_part[:w])
                    _add(dk[n, j0:j0 + w], dk_part[:w])


def kernel_table(forward, backward, bias_backward) -> dict:
    """A device's table entries for the attention primitives, given its three kernels: the primitives' optional
    inputs (mask, bias) and attributes become the kernels' arguments (``kernel_args``)."""
    return {
        "attention": lambda q, k, v, *extra, causal, scale: forward(q, k, v, *kernel_args(extra, causal, scale)),
        "attention_grad": lambda g, o, q, k, v, *extra, causal, scale: backward(
            g, o, q, k, v, *kernel_args(extra, causal, scale)),
        "attention_bias_grad": lambda g, o, q, k, v, *extra, causal, scale: bias_backward(
            g, o, q, k, v, *kernel_args(extra, causal, scale)),
    }


KERNELS = kernel_table(attention, attention_backward, attention_bias_backward)
