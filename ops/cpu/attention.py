"""Scaled dot-product attention, fused: softmax(s·QKᵀ, mask) V without ever holding a Tq × Tk matrix.

q (..., Tq, d), k (..., Tk, d), v (..., Tk, dv) with one batch shape, seen as N = prod(...) independent
(batch, head) pairs; s is the scale (1/√d by default). Key j takes part for query i when the mask allows
it (True = may attend; the mask broadcasts to (..., Tq, Tk)) and, when causal, when j ≤ i + Tk − Tq
(bottom-right aligned). A query with no key taking part gets output 0 and sends gradient 0 everywhere;
never NaN.

Per query tile Qₜ (BQ = 64 rows), over the key chunks K_c, V_c (BK keys each) that the tile may see:

  forward:   E_c = exp(s·(Qₜ K_cᵀ − m)) (0 where masked),  l = Σ_c rowsum E_c,  Oₜ = (Σ_c E_c V_c) / l
  backward:  E_c and l recomputed as above,  D = rowsum(dOₜ ∘ Oₜ),  P_c = E_c / l
             dV_c += P_cᵀ dOₜ,  dS_c = s·P_c ∘ (dOₜ V_cᵀ − D),  dQₜ = Σ_c dS_c K_c,  dK_c += dS_cᵀ Qₜ

with m the row maximum of the scores; 1/l scales rows of Oₜ, dOₜ and dS instead of the Tq × Tk entries.
The softmax is exact per tile rather than online (Dao et al.'s running maximum and rescaling): a tile
keeps its BQ × Tk exponentials in a per-thread buffer (1 MiB at Tk = 4096), so the backward recomputes
them bit for bit from Q and K and needs neither the log-sum-exp nor a second output of the forward.
Memory is that buffer and a transposed copy of one head's K (and V) per thread, plus the O(N·T·d)
inputs and outputs; causal tiles skip the key chunks past their last query's diagonal.

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
pairs; backward: the n, each thread owning its dK and dV) without oversubscribing the cores. The
threads are Python threads running ``nogil`` kernels (``threads.in_threads``): as prange loops the two
kernels took 3-4x longer to compile. K and V are read as chunks stored transposed, because OpenBLAS
multiplies by a transposed right operand at ~87 GFLOP/s and by a plain one at ~150 (64³ on one core,
cache-hot).

Measured on one core (CPU time, the machine shared), causal, against PyTorch 2.13's
scaled_dot_product_attention: N = 128, T = 64, d = 32: forward 1.7 ms, backward 2.8 ms (PyTorch 3.5 and
2.7); N = 32, T = 256, d = 32: 3.8 and 6.5 ms (3.4 and 7.7); N = 4, T = 4096, d = 64: 101 and 227 ms
(83 and 193), the exponentials taking a third of the forward.
"""
import math

import numpy as np
from numba import njit

from ops.cpu import mathfn
from ops.cpu.layout import mask_rows
from ops.cpu.threads import in_threads

_BQ = 64                 # queries per tile
_BLAS_SERIAL_MAX = 2 ** 18       # multiply-adds: OpenBLAS runs a product this small on the calling thread


def attention(q, k, v, mask=None, causal=False, scale=None):
    """softmax(scale · q kᵀ) v over the allowed keys, for q (..., Tq, d), k (..., Tk, d), v (..., Tk, dv)
    with one batch shape and a mask broadcasting to (..., Tq, Tk); scale defaults to 1/√d."""
    q, k, v, masking, scale, bk = _prepare(q, k, v, mask, causal, scale)
    tq, dv = q.shape[-2], v.shape[-1]
    q3, k3, v3 = _flat(q), _flat(k), _flat(v)
    o = np.zeros(q3.shape[:2] + (dv,), q.dtype)
    kt = _all_chunks_transposed(k3, bk)
    tiles = (tq + _BQ - 1) // _BQ
    in_threads(_forward_tiles, len(q3) * tiles, q3, kt, v3, o, *masking, scale, bk, np.finfo(q.dtype).min,
               work=q.size)
    return o.reshape(q.shape[:-1] + (dv,))


def attention_backward(g, o, q, k, v, mask=None, causal=False, scale=None):
    """The gradients of ``attention`` for the output gradient g, from its output o, stacked in one array
    (3, ..., max(Tq, Tk), max(d, dv)) that is 0 outside them:

      dq = grads[0, ..., :Tq, :d],  dk = grads[1, ..., :Tk, :d],  dv = grads[2, ..., :Tk, :dv]

    (one array, so that a graph node can hold all three; for self-attention each is a contiguous view)."""
    q, k, v, masking, scale, bk = _prepare(q, k, v, mask, causal, scale)
    g, o = (np.ascontiguousarray(a, q.dtype) for a in (g, o))
    (tq, d), (tk, dv) = q.shape[-2:], v.shape[-2:]
    grads = np.zeros((3, math.prod(q.shape[:-2]), max(tq, tk), max(d, dv)), q.dtype)
    in_threads(_backward_heads, len(grads[0]), _flat(q), _flat(k), _flat(v), _flat(g), _flat(o),
               grads[0, :, :tq, :d], grads[1, :, :tk, :d], grads[2, :, :tk, :dv], *masking, scale, bk,
               np.finfo(q.dtype).min, work=q.size)
    return grads.reshape((3,) + q.shape[:-2] + grads.shape[2:])


def _prepare(q, k, v, mask, causal, scale):
    """Contiguous operands, (mask rows, mask index, causal), the scale in q's dtype, the key chunk size."""
    q, k, v = (np.ascontiguousarray(a) for a in (q, k, v))
    if q.ndim < 2 or k.shape[:-2] != q.shape[:-2] or k.shape[-1] != q.shape[-1] or v.shape[:-1] != k.shape[:-1] \
            or not q.dtype == k.dtype == v.dtype:
        raise ValueError(f"attention needs q (..., Tq, d), k (..., Tk, d), v (..., Tk, dv) of one batch shape and "
                         f"dtype; got {q.shape} {q.dtype}, {k.shape} {k.dtype}, {v.shape} {v.dtype}")
    d, dv = q.shape[-1], v.shape[-1]
    scale = q.dtype.type(1 / math.sqrt(d) if scale is None else scale)
    bk = max(8, min(256, _BLAS_SERIAL_MAX // (_BQ * max(d, dv, 1)), k.shape[-2]))   # buffers no wider than Tk
    return q, k, v, (*mask_rows(mask, q.shape[:-1] + k.shape[-2:-1]), causal), scale, bk


def _flat(a):
    """(..., T, features) as (N, T, features)"""
    return a.reshape((math.prod(a.shape[:-2]),) + a.shape[-2:])


@njit(cache=True)
def _key_end(i, tq, tk, causal):
    """Query i may see keys j < end: all tk, or j <= i + tk - tq when causal."""
    return min(max(i + 1 + tk - tq, 0), tk) if causal else tk


@njit(cache=True)
def _chunks_transposed(x, bk, out):
    """Fill out (chunks, f · bk) with x (T × f) as its key chunks transposed: out[c, :f·w].reshape(f, w) =
    x[c·bk : c·bk + w]ᵀ. BLAS runs q kᵀ at 150 GFLOP/s with kᵀ so stored and at 87 reading k transposed
    (64 × 64 × 64, one core). (Explicit loops here and below: numba took 6 s to compile one whole-array
    assignment.)"""
    t, f = x.shape
    for c in range(out.shape[0]):
        j0 = c * bk
        w = min(bk, t - j0)
        for i in range(w):
            for j in range(f):
                out[c, j * w + i] = x[j0 + i, j]


@njit(fastmath=mathfn.FASTMATH, cache=True)
def _add(total, part):
    """total += part, for 2-D arrays of one shape"""
    for i in range(part.shape[0]):
        for j in range(part.shape[1]):
            total[i, j] += part[i, j]


@njit(fastmath=mathfn.FASTMATH, cache=True)
def _exponentials(q, kt, end, first, tq, tk, allowed_rows, allowed_index, causal, scale, lowest, bk, e, inverse):
    """The unnormalized softmax of the query tile q (rows × d) — queries first, first + 1, ... of tq — over
    the chunks of the tk keys, given transposed (``_chunks_transposed``), that hold its first ``end`` keys:
    e = exp(scale · (q kᵀ − row max)), 0 where a key takes no part, written chunk by chunk (e[c, :rows · w]
    is the rows × w block of keys c·bk ≤ j < c·bk + w, w = min(bk, tk − c·bk)), and inverse = 1 / rowsum(e)
    (0 for a row with no key, and for a NaN row, whose e is NaN where it sees a key). Returns the number of
    chunks."""
    rows, d = q.shape
    chunks = (end + bk - 1) // bk
    zero = e.dtype.type(0)
    m = np.full(rows, lowest, e.dtype)
    for c in range(chunks):
        j0 = c * bk
        w = min(bk, tk - j0)
        s = e[c, :rows * w].reshape((rows, w))
        np.dot(q, kt[c, :d * w].reshape((d, w)), s)
        for r in range(rows):
            allowed, stop = allowed_rows[allowed_index[r]][j0:], min(w, _key_end(first + r, tq, tk, causal) - j0)
            row_max = m[r]
            for j in range(stop):
                row_max = mathfn.maximum(row_max, s[r, j] if allowed[j] else lowest)
            m[r] = row_max
    for r in range(rows):
        inverse[r], m[r] = zero, mathfn.softmax_shift(m[r])
    for c in range(chunks):
        j0 = c * bk
        w = min(bk, tk - j0)
        s = e[c, :rows * w].reshape((rows, w))
        for r in range(rows):
            allowed, stop = allowed_rows[allowed_index[r]][j0:], min(w, _key_end(first + r, tq, tk, causal) - j0)
            row_max, total = m[r], zero
            for j in range(max(stop, 0)):
                x = mathfn.exp((s[r, j] - row_max) * scale) if allowed[j] else zero
                s[r, j] = x
                total += x
            for j in range(max(stop, 0), w):
                s[r, j] = zero
            inverse[r] += total
    for r in range(rows):
        inverse[r] = e.dtype.type(1) / inverse[r] if inverse[r] > zero else zero
    return chunks


@njit(cache=True)
def _all_chunks_transposed(k, bk):
    """``_chunks_transposed`` of every k[n]: (N, chunks, d · bk)"""
    out = np.empty((k.shape[0], (k.shape[1] + bk - 1) // bk, k.shape[2] * bk), k.dtype)
    for n in range(k.shape[0]):
        _chunks_transposed(k[n], bk, out[n])
    return out


@njit(nogil=True, fastmath=mathfn.FASTMATH, cache=True)
def _forward_tiles(start, stop, q, kt, v, o, allowed_rows, allowed_index, causal, scale, bk, lowest):
    """o[n, i] = Σ_j e[n, i, j] v[n, j] / Σ_j e[n, i, j] for the (n, query tile) pairs start ≤ t < stop"""
    tq, tk, dv = q.shape[1], v.shape[1], v.shape[2]
    tiles = (tq + _BQ - 1) // _BQ
    e = np.empty((kt.shape[1], _BQ * bk), q.dtype)
    inverse, part = np.empty(_BQ, q.dtype), np.empty((_BQ, dv), q.dtype)
    for t in range(start, stop):
        n, i0 = t // tiles, (t % tiles) * _BQ
        i1 = min(i0 + _BQ, tq)
        rows, end = i1 - i0, _key_end(i1 - 1, tq, tk, causal)
        if end == 0:
            continue
        chunks = _exponentials(q[n, i0:i1], kt[n], end, i0, tq, tk, allowed_rows,
                               allowed_index[n * tq + i0:n * tq + i1], causal, scale, lowest, bk, e, inverse)
        for c in range(chunks):
            j0 = c * bk
            w = min(bk, tk - j0)
            np.dot(e[c, :rows * w].reshape((rows, w)), v[n, j0:j0 + w], part[:rows])
            _add(o[n, i0:i1], part[:rows])
        for r in range(rows):
            for f in range(dv):
                o[n, i0 + r, f] *= inverse[r]


@njit(nogil=True, fastmath=mathfn.FASTMATH, cache=True)
def _backward_heads(start, stop, q, k, v, g, o, dq, dk, dv, allowed_rows, allowed_index, causal, scale, bk,
                    lowest):
    """dq, dk, dv (zeros on entry) += the gradients for the pairs start ≤ n < stop. With P = e / l:
    dV += eᵀ (dO / l) and dS = (scale / l) · e ∘ (dO Vᵀ − D)."""
    tq, d = q.shape[1:]
    tk, dvalue = k.shape[1], v.shape[2]
    zero = q.dtype.type(0)
    e = np.empty(((tk + bk - 1) // bk, _BQ * bk), q.dtype)
    ds = np.empty(_BQ * bk, q.dtype)
    dq_part, dk_part, dv_part = np.empty((_BQ, d), q.dtype), np.empty((bk, d), q.dtype), np.empty((bk, dvalue), q.dtype)
    inverse, delta, g_scaled = np.empty(_BQ, q.dtype), np.empty(_BQ, q.dtype), np.empty((_BQ, dvalue), q.dtype)
    kt, vt = np.empty((e.shape[0], d * bk), q.dtype), np.empty((e.shape[0], dvalue * bk), q.dtype)
    for n in range(start, stop):
        _chunks_transposed(k[n], bk, kt)
        _chunks_transposed(v[n], bk, vt)
        for i0 in range(0, tq, _BQ):
            i1 = min(i0 + _BQ, tq)
            rows, end = i1 - i0, _key_end(i1 - 1, tq, tk, causal)
            if end == 0:
                continue
            chunks = _exponentials(q[n, i0:i1], kt, end, i0, tq, tk, allowed_rows,
                                   allowed_index[n * tq + i0:n * tq + i1], causal, scale, lowest, bk, e, inverse)
            for r in range(rows):
                total = zero
                for f in range(dvalue):
                    total += g[n, i0 + r, f] * o[n, i0 + r, f]
                    g_scaled[r, f] = g[n, i0 + r, f] * inverse[r]
                delta[r] = total if inverse[r] != zero else zero        # a NaN row's NaN is in e
            for c in range(chunks):
                j0 = c * bk
                w = min(bk, tk - j0)
                ec = e[c, :rows * w].reshape((rows, w))
                dsc = ds[:rows * w].reshape((rows, w))
                np.dot(ec.T, g_scaled[:rows], dv_part[:w])
                _add(dv[n, j0:j0 + w], dv_part[:w])
                np.dot(g[n, i0:i1], vt[c, :dvalue * w].reshape((dvalue, w)), dsc)
                for r in range(rows):
                    factor = scale * inverse[r]
                    for j in range(w):
                        dsc[r, j] = factor * ec[r, j] * (dsc[r, j] - delta[r])
                np.dot(dsc, k[n, j0:j0 + w], dq_part[:rows])
                _add(dq[n, i0:i1], dq_part[:rows])
                np.dot(dsc.T, q[n, i0:i1], dk_part[:w])
                _add(dk[n, j0:j0 + w], dk_part[:w])
