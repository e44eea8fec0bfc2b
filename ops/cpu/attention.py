"""Scaled dot-product attention, fused: softmax(s·QKᵀ + bias, mask) V without ever holding a Tq × Tk matrix.

q (..., Tq, d), k (..., Tk, d), v (..., Tk, dv) with one batch shape, seen as N = prod(...) independent
(batch, head) pairs; s is the scale (1/√d by default); the optional float bias broadcasts to (..., Tq, Tk)
(ALiBi's (H, Tq, Tk), a (B, 1, 1, Tk) padding bias; read as distinct rows, never expanded). Key j takes part
for query i when the mask allows it (True = may attend; the mask broadcasts to (..., Tq, Tk)) and, when
causal, when j ≤ i + Tk − Tq (bottom-right aligned). A query with no key taking part, or whose biases are all
−inf, gets output 0 and sends gradient 0 everywhere; never NaN (PyTorch gives NaN for the −inf row).

Two layouts: "bhtd", above, and "bthd", q (..., Tq, H, d), k (..., Tk, H, d), v (..., Tk, H, dv), the heads'
axis after the tokens' as a projection's output reshaped into heads is, the pairs being (batch, head); the
output and the gradients follow the layout, the mask and bias broadcast to (..., H, Tq, Tk) in both. The
kernels gather one head's rows into contiguous buffers (each thread its own) and scatter its results back,
so that a model's heads need no transposed copies before and after.

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

For attention split over blocks of keys (ring attention, ``ops/cpu/ring.py``) ``attention_lse`` also returns each
row's log-sum-exp L = m + log l, by which blocks merge exactly, and ``attention_block_backward`` is the backward
of one block given the rows' L and D over all blocks: there P = E_c · exp(m − L) replaces E_c / l.
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
from ops.cpu.threads import BLAS_SERIAL_MAX, in_threads
from ops.shapes import LAYOUTS, extras, lengths, scores_shape

_BQ = 64                 # queries per tile


def kernel_args(extra, causal, scale, layout="bhtd") -> tuple:
    """The arguments of the attention kernels (CPU and CUDA) after q, k, v, from the primitive's optional inputs
    and attributes: (mask, causal, scale, bias, layout)."""
    mask, bias = extras(extra)
    return mask, causal, scale, bias, layout


def attention(q, k, v, mask=None, causal=False, scale=None, bias=None, layout="bhtd"):
    """softmax(scale · q kᵀ + bias) v over the allowed keys, for q (..., Tq, d), k (..., Tk, d), v (..., Tk, dv)
    with one batch shape and a mask and a bias broadcasting to (..., Tq, Tk); scale defaults to 1/√d. With
    ``layout="bthd"`` the heads' axis follows the tokens': q (..., Tq, H, d), k (..., Tk, H, d), v (..., Tk, H, dv)
    and the output (..., Tq, H, dv), read and written in place; the mask and bias still broadcast to
    (..., H, Tq, Tk)."""
    return attention_lse(q, k, v, mask, causal, scale, bias, layout)[0]


def attention_lse(q, k, v, mask=None, causal=False, scale=None, bias=None, layout="bhtd"):
    """(o, L): ``attention``'s output and each query's log-sum-exp L = log Σ_j exp(z_j) over the keys it sees
    (z = scale · q kᵀ + bias), shaped as o without its features: (..., Tq), or (..., Tq, H) for "bthd"; −inf for a
    query that sees no key (its output 0). Attention over the keys split in blocks b merges exactly:
    o = Σ_b exp(L_b − L) o_b with L = log Σ_b exp(L_b) (``ops.cpu.ring.merge``; Milakov & Gimelshein 2018)."""
    q4, k4, v4, masking, scale, bk = _prepare(q, k, v, mask, causal, scale, bias, layout)
    (n, tq, h, _), dv = q4.shape, v4.shape[-1]
    o = np.zeros((n, tq, h, dv), q4.dtype)
    lse = np.full((n, tq, h), -np.inf, q4.dtype)
    tiles = (tq + _BQ - 1) // _BQ
    in_threads(_forward_tiles, n * h * tiles, q4, k4, v4, o, lse, *masking, scale, bk, np.finfo(q4.dtype).min,
               work=q4.size)
    return o.reshape(np.shape(q)[:-1] + (dv,)), lse.reshape(np.shape(q)[:-1])


def attention_backward(g, o, q, k, v, mask=None, causal=False, scale=None, bias=None, layout="bhtd"):
    """The gradients of ``attention`` for the output gradient g, from its output o, stacked in one array
    (3, ..., max(Tq, Tk), max(d, dv)) that is 0 outside them:

      dq = grads[0, ..., :Tq, :d],  dk = grads[1, ..., :Tk, :d],  dv = grads[2, ..., :Tk, :dv]

    (one array, so that a graph node can hold all three; for self-attention each is a contiguous view); with
    ``layout="bthd"``, (3, ..., max(Tq, Tk), H, max(d, dv)) and dq = grads[0, ..., :Tq, :, :d] and so on."""
    return _stacked_backward(g, o, None, q, k, v, mask, causal, scale, bias, layout)


def attention_block_backward(g, q, k, v, lse, delta, mask=None, causal=False, scale=None, bias=None,
                             layout="bhtd"):
    """The gradients (stacked as ``attention_backward``'s) of one block of keys of a larger attention, whose
    queries' log-sum-exp over all its keys is ``lse`` and whose D = rowsum(dO ∘ O) − dL is ``delta`` (both
    shaped as ``attention_lse``'s L; dL the gradient reaching L, if any): with P = exp(z − L) over the block,
    dV = Pᵀ dO, dZ = P ∘ (dO Vᵀ − D), dQ = scale · dZ K, dK = scale · dZᵀ Q (FlashAttention-2, Dao 2023). The
    blocks' gradients sum to the whole attention's; a row with L = −inf gets none."""
    rows = np.shape(q)[:-1]
    if np.shape(lse) != rows or np.shape(delta) != rows:
        raise ValueError(f"attention_block_backward needs lse and delta shaped {rows}, the queries' rows; got "
                         f"{np.shape(lse)} and {np.shape(delta)}")
    return _stacked_backward(g, None, (lse, delta), q, k, v, mask, causal, scale, bias, layout)


def _stacked_backward(g, o, rows, q, k, v, mask, causal, scale, bias, layout):
    """dq, dk, dv stacked (``attention_backward``), from the output o or from the rows' given (L, D)."""
    q, k, v = _checked(q, k, v, layout)
    (tq, tk), d, dv = lengths(q.shape, k.shape, layout), q.shape[-1], v.shape[-1]
    stacked = q.shape[:-2] + (max(tq, tk), max(d, dv)) if layout == "bhtd" else \
        q.shape[:-3] + (max(tq, tk), q.shape[-2], max(d, dv))
    grads = np.zeros((3,) + stacked, q.dtype)
    dq, dk, dv = (_heads(grads[i], layout)[:, :length, :, :width]
                  for i, (length, width) in enumerate(((tq, d), (tk, d), (tk, dv))))
    _backward(g, o, rows, q, k, v, mask, causal, scale, bias, layout, (dq, dk, dv), None)
    return grads




def attention_bias_backward(g, o, q, k, v, mask=None, causal=False, scale=None, bias=None, layout="bhtd"):
    """The gradient of ``attention`` with respect to its bias, dZ = P ∘ (g vᵀ − rowsum(g ∘ o)), at the full
    shape of the scores (..., H, Tq, Tk) (for either layout): 0 where a key takes no part."""
    q, k, v = _checked(q, k, v, layout)
    scores = scores_shape(q.shape, k.shape, layout)
    dz = np.zeros((math.prod(scores[:-2]),) + scores[-2:], q.dtype)
    _backward(g, o, None, q, k, v, mask, causal, scale, bias, layout, (None, None, None), dz)
    return dz.reshape(scores)


def _backward(g, o, rows, q, k, v, mask, causal, scale, bias, layout, weights, dz):
    """Run ``_backward_heads`` over the (batch, head) pairs in threads, writing the weights' gradients (dq, dk, dv)
    or dz, the other None: D from the output o, or the rows' (L, D) given (``attention_block_backward``), each then
    as (batch, T, heads, 1)."""
    q, k, v, masking, scale, bk = _prepare(q, k, v, mask, causal, scale, bias, layout)
    g = _heads(np.ascontiguousarray(g, q.dtype), layout)
    o, lse, delta = (_heads(np.ascontiguousarray(o, q.dtype), layout), None, None) if rows is None else \
        (None, *(np.ascontiguousarray(x, q.dtype).reshape(q.shape[:3] + (1,)) for x in rows))
    in_threads(_backward_heads, q.shape[0] * q.shape[2], q, k, v, g, o, lse, delta, *weights, dz, *masking, scale,
               bk, np.finfo(q.dtype).min, work=q.size)


def _checked(q, k, v, layout):
    """q, k and v contiguous, once their layout, shapes and dtypes are checked."""
    if layout not in LAYOUTS:
        raise ValueError(f"attention layout must be one of {LAYOUTS}, got {layout!r}")
    q, k, v = (np.ascontiguousarray(a) for a in (q, k, v))
    lead = 2 if layout == "bhtd" else 3          # axes after the batch: (T, features) or (T, H, features)
    if q.ndim < lead or k.shape[:-lead] != q.shape[:-lead] or k.shape[-lead + 1:] != q.shape[-lead + 1:] \
            or v.shape[:-1] != k.shape[:-1] or not q.dtype == k.dtype == v.dtype:
        raise ValueError(f"attention ({layout}) needs q, k and v of one batch shape, heads and dtype, k and q of one "
                         f"width, v and k of one length; got {q.shape} {q.dtype}, {k.shape} {k.dtype}, "
                         f"{v.shape} {v.dtype}")
    return q, k, v


def _prepare(q, k, v, mask, causal, scale, bias, layout):
    """q, k and v as (batch, T, heads, features) arrays (``_heads``), (mask rows, mask index, bias rows, bias
    index, causal), the scale in q's dtype, the key chunk size."""
    q, k, v = _checked(q, k, v, layout)
    scores = scores_shape(q.shape, k.shape, layout)
    q, k, v = (_heads(a, layout) for a in (q, k, v))
    d, dv = q.shape[-1], v.shape[-1]
    scale = q.dtype.type(1 / math.sqrt(d) if scale is None else scale)
    bk = max(8, min(256, BLAS_SERIAL_MAX // (_BQ * max(d, dv, 1)), k.shape[1]))      # buffers no wider than Tk
    bias = np.zeros(scores[-1:], q.dtype) if bias is None else np.asarray(bias, q.dtype)
    return q, k, v, (*mask_rows(mask, scores), *broadcast_rows(bias, scores, "bias"), causal), scale, bk


def _heads(a, layout):
    """a as (batch, T, heads, features): (..., T, f) as (N, T, 1, f), (..., T, H, f) as (N, T, H, f) (views)."""
    if layout == "bhtd":
        return a.reshape((math.prod(a.shape[:-2]), a.shape[-2], 1, a.shape[-1]))
    return a.reshape((math.prod(a.shape[:-3]),) + a.shape[-3:])


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
                  lowest, bk, e, m, inverse):
    """The unnormalized softmax of the query tile q (rows × d) — queries first, first + 1, ... of tq — over
    the first ``end`` of the tk keys k (tk × d), in chunks:
    e = exp(z − row max) for z = scale · q kᵀ + bias, 0 where a key takes no part, written chunk by chunk
    (e[c, :rows · w] is the rows × w block of keys c·bk ≤ j < c·bk + w, w = min(bk, end − c·bk)), and
    inverse = 1 / rowsum(e) (0 for a row with no key, and for a NaN row, whose e is NaN where it sees a key),
    m = the rows' shifts (so that a row's log-sum-exp is m + log rowsum(e)). Returns the number of chunks."""
    rows = q.shape[0]
    chunks = (end + bk - 1) // bk
    zero = e.dtype.type(0)
    m[:rows] = lowest
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


@njit(cache=True)
def _gather(x, b, h, out):
    """out = x[b, :, h] for x (batch, T, heads, features): one head, contiguous"""
    for t in range(x.shape[1]):
        for f in range(x.shape[3]):
            out[t, f] = x[b, t, h, f]


@njit(cache=True)
def _scatter(part, x, b, h, t0):
    """x[b, t0 + t, h] = part[t] for x (batch, T, heads, features)"""
    for t in range(part.shape[0]):
        for f in range(part.shape[1]):
            x[b, t0 + t, h, f] = part[t, f]


@njit(nogil=True, fastmath=mathfn.FASTMATH, cache=True)
def _forward_tiles(start, stop, q, k, v, o, lse, allowed_rows, allowed_index, bias_rows, bias_index, causal, scale,
                   bk, lowest):
    """o[b, i, h] = Σ_j e[n, i, j] v[b, j, h] / Σ_j e[n, i, j], n = b·heads + h, and the log-sum-exp
    lse[b, i, h] = m + log Σ_j e[n, i, j] (left as it is, −inf, for a row with no key; NaN for a NaN row), for the
    (n, query tile) pairs start ≤ t < stop; a head's keys and values are gathered once per run of its tiles"""
    tq, heads, d = q.shape[1:]
    tk, dv = v.shape[1], v.shape[3]
    tiles = (tq + _BQ - 1) // _BQ
    e = np.empty(((tk + bk - 1) // bk, _BQ * bk), q.dtype)
    keys, values, queries = np.empty((tk, d), q.dtype), np.empty((tk, dv), q.dtype), np.empty((tq, d), q.dtype)
    inverse, part, out = np.empty(_BQ, q.dtype), np.empty((_BQ, dv), q.dtype), np.empty((_BQ, dv), q.dtype)
    m = np.empty(_BQ, q.dtype)
    loaded = -1
    for t in range(start, stop):
        n, i0 = t // tiles, (t % tiles) * _BQ
        i1 = min(i0 + _BQ, tq)
        rows, end = i1 - i0, _key_end(i1 - 1, tq, tk, causal)
        if end == 0:
            continue
        b, h = n // heads, n % heads
        if n != loaded:
            _gather(k, b, h, keys)
            _gather(v, b, h, values)
            _gather(q, b, h, queries)
            loaded = n
        rows_of = slice(n * tq + i0, n * tq + i1)
        chunks = _exponentials(queries[i0:i1], keys, end, i0, tq, tk, allowed_rows, allowed_index[rows_of],
                               bias_rows, bias_index[rows_of], causal, scale, lowest, bk, e, m, inverse)
        out[:rows] = 0
        for c in range(chunks):
            j0 = c * bk
            w = min(bk, end - j0)
            np.dot(e[c, :rows * w].reshape((rows, w)), values[j0:j0 + w], part[:rows])
            _add(out[:rows], part[:rows])
        for r in range(rows):
            for f in range(dv):
                out[r, f] *= inverse[r]
            lse[b, i0 + r, h] = m[r] - math.log(inverse[r]) if inverse[r] > 0 else m[r] - math.inf
        _scatter(out[:rows], o, b, h, i0)


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
def _given_deltas(g, m, lse, given, inverse, delta, g_scaled):
    """For a query tile's output gradient g, row shifts m and given rows' L and D: the factor of e in
    P = e · exp(m − L) as ``inverse`` (0 for a row that sees no key of the block, or has L = −inf), delta = D
    where the row sees a key, and g_scaled = g · exp(m − L)."""
    zero = g.dtype.type(0)
    for r in range(g.shape[0]):
        inverse[r] = mathfn.exp(m[r] - lse[r, 0]) if inverse[r] > zero and lse[r, 0] > -math.inf else zero
        delta[r] = given[r, 0] if inverse[r] != zero else zero
        for f in range(g.shape[1]):
            g_scaled[r, f] = g[r, f] * inverse[r]


@njit(fastmath=mathfn.FASTMATH, cache=True)
def _score_grads(ec, dp, inverse, delta, factor, out):
    """out = factor · P ∘ (dp − delta) for a chunk's exponentials ec (P = ec / l, rows × w)"""
    for r in range(ec.shape[0]):
        f = factor * inverse[r]
        for j in range(ec.shape[1]):
            out[r, j] = f * ec[r, j] * (dp[r, j] - delta[r])


@njit(nogil=True, fastmath=mathfn.FASTMATH, cache=True)
def _backward_heads(start, stop, q, k, v, g, o, lse, delta_given, dq, dk, dv, dz, allowed_rows, allowed_index,
                    bias_rows, bias_index, causal, scale, bk, lowest):
    """For the (batch, head) pairs n = b·heads + h, start ≤ n < stop, write dq, dk, dv (b, :, h) when they are
    given (not None), and dz[n] = P ∘ (dO Vᵀ − D) when it is. With P = e / l: dV += eᵀ (dO / l) and
    dS = scale · dZ = (scale / l) · e ∘ (dO Vᵀ − D). The head's q, k, v, dO and O are gathered first; when the
    rows' L and D are given instead of O (o None), P = e · exp(m − L) (``_given_deltas``). Numba compiles one
    specialization per combination of the None arguments, without the branches that test one of them."""
    tq, heads, d = q.shape[1:]
    tk, dvalue = k.shape[1], v.shape[3]
    e = np.empty(((tk + bk - 1) // bk, _BQ * bk), q.dtype)
    ds = np.empty(_BQ * bk, q.dtype)
    dq_part, dk_part, dv_part = np.empty((_BQ, d), q.dtype), np.empty((bk, d), q.dtype), np.empty((bk, dvalue), q.dtype)
    inverse, delta, g_scaled = np.empty(_BQ, q.dtype), np.empty(_BQ, q.dtype), np.empty((_BQ, dvalue), q.dtype)
    qh, kh, vh = np.empty((tq, d), q.dtype), np.empty((tk, d), q.dtype), np.empty((tk, dvalue), q.dtype)
    gh, oh = np.empty((tq, dvalue), q.dtype), np.empty((tq, dvalue), q.dtype)
    m = np.empty(_BQ, q.dtype)
    lh, deltah = np.empty((tq, 1), q.dtype), np.empty((tq, 1), q.dtype)
    dqh, dkh, dvh = np.empty((tq, d), q.dtype), np.empty((tk, d), q.dtype), np.empty((tk, dvalue), q.dtype)
    for n in range(start, stop):
        b, h = n // heads, n % heads
        for x, head in ((q, qh), (k, kh), (v, vh), (g, gh)):
            _gather(x, b, h, head)
        if lse is not None:
            _gather(lse, b, h, lh)
            _gather(delta_given, b, h, deltah)
        if o is not None:
            _gather(o, b, h, oh)
        dqh[:], dkh[:], dvh[:] = 0, 0, 0
        for i0 in range(0, tq, _BQ):
            i1 = min(i0 + _BQ, tq)
            rows, end = i1 - i0, _key_end(i1 - 1, tq, tk, causal)
            if end == 0:
                continue
            rows_of = slice(n * tq + i0, n * tq + i1)
            chunks = _exponentials(qh[i0:i1], kh, end, i0, tq, tk, allowed_rows, allowed_index[rows_of], bias_rows,
                                   bias_index[rows_of], causal, scale, lowest, bk, e, m, inverse)
            if lse is not None:
                _given_deltas(gh[i0:i1], m, lh[i0:i1], deltah[i0:i1], inverse, delta, g_scaled)
            if o is not None:
                _tile_deltas(gh[i0:i1], oh[i0:i1], inverse, delta, g_scaled)
            for c in range(chunks):
                j0 = c * bk
                w = min(bk, end - j0)
                ec = e[c, :rows * w].reshape((rows, w))
                dsc = ds[:rows * w].reshape((rows, w))
                np.dot(gh[i0:i1], vh[j0:j0 + w].T, dsc)
                if dz is not None:
                    _score_grads(ec, dsc, inverse, delta, q.dtype.type(1), dz[n, i0:i1, j0:j0 + w])
                if dq is not None:
                    np.dot(ec.T, g_scaled[:rows], dv_part[:w])
                    _add(dvh[j0:j0 + w], dv_part[:w])
                    _score_grads(ec, dsc, inverse, delta, scale, dsc)
                    np.dot(dsc, kh[j0:j0 + w], dq_part[:rows])
                    _add(dqh[i0:i1], dq_part[:rows])
                    np.dot(dsc.T, qh[i0:i1], dk_part[:w])
                    _add(dkh[j0:j0 + w], dk_part[:w])
        if dq is not None:
            _scatter(dqh, dq, b, h, 0)
            _scatter(dkh, dk, b, h, 0)
            _scatter(dvh, dv, b, h, 0)


def kernel_table(forward, backward, bias_backward) -> dict:
    """A device's table entries for the attention primitives, given its three kernels: the primitives' optional
    inputs (mask, bias) and attributes become the kernels' arguments (``kernel_args``)."""
    return {
        "attention": lambda q, k, v, *extra, **attrs: forward(q, k, v, *kernel_args(extra, **attrs)),
        "attention_grad": lambda g, o, q, k, v, *extra, **attrs: backward(g, o, q, k, v, *kernel_args(extra, **attrs)),
        "attention_bias_grad": lambda g, o, q, k, v, *extra, **attrs: bias_backward(
            g, o, q, k, v, *kernel_args(extra, **attrs)),
    }


KERNELS = kernel_table(attention, attention_backward, attention_bias_backward)
