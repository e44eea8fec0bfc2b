"""Fused scaled dot-product attention, flash-style (Dao et al. 2022; FlashAttention-2, 2023): the Tq x Tk
scores never exist in memory, only tiles of keys and values in shared memory and one row of state per query.

The contract of ops/cpu/attention.py: q (..., Tq, d), k (..., Tk, d), v (..., Tk, dv) with one batch shape,

  attention = softmax(scale q kᵀ + bias, mask, causal) v,   scale = 1 / sqrt(d) unless given,

query i sees key j when the mask (broadcast to (..., Tq, Tk), read through strides, as the float bias is)
allows it and, when ``causal``, when j <= i + Tk - Tq; a query that sees no key, or only −inf biases, gets
output 0 and gradients 0, never NaN. ``attention_backward`` returns dq, dk, dv stacked in one zero-padded array
(3, ..., max(Tq, Tk), max(d, dv)); ``attention_bias_backward`` the bias's gradient dZ_ij = P_ij (dO_i·v_j − D_i)
at the full (..., Tq, Tk) shape, a thread per score. Here d, dv <= HEAD_DIM_MAX.

Forward, a block per (tile of ATTENTION_TILE queries, batch entry), a thread per query. For each tile of keys,
loaded into shared memory by the whole block, each thread computes its scores s_j = scale q·k_j + b_j and updates
its running max m, running sum l and output accumulator o (online softmax):

  m' = max(m, max_j s_j);  l = l e^(m - m') + sum_j e^(s_j - m');  o = o e^(m - m') + sum_j e^(s_j - m') v_j

At the end the output is o / l, and L = m + log l is each query's log-sum-exp (+inf when l = 0: it sees no key,
or only −inf biases, and every probability e^(z - L) of the backward is then 0). ``attention_lse`` returns it
with −inf there, as the CPU's; ``attention_block_backward`` (ring attention's block) takes L and D given.
A NaN or +inf among the scores a query sees makes l NaN (e^(s - m) is NaN for it: m ignores a NaN, and a +inf
score makes m = +inf), hence its output row and L NaN, and through L every probability it has in the backward.
The backward visits only the (query, key) pairs that see each other, so a NaN row of q or k reaches no gradient
of a query or key that does not see it; on the CPU it does, through the products (0 · NaN).

Backward: the forward runs again for L (the primitive keeps only its output), then three kernels and no
atomics: D_i = sum_c dO_ic O_ic (a thread per query); then with P_ij = e^(scale q_i·k_j + b_ij - L_i) recomputed
tile by tile and dS_ij = P_ij (dO_i·v_j - D_i):
  dv_j = sum_i P_ij dO_i,  dk_j = scale sum_i dS_ij q_i   (a block per tile of keys, a thread per key)
  dq_i = scale sum_j dS_ij k_j                              (a block per tile of queries, a thread per query)
"""
import functools
import math

import numpy as np

from ops._cuda import cuda, empty
from ops.cpu.attention import _key_end, kernel_table
from ops.cuda import mathfn
from ops.cuda.elementwise import full
from ops.cuda.launch import ATTENTION_TILE, HEAD_DIM_MAX, THREADS, blocks
from ops.cuda.layout import broadcast_strides, flat, offset
from ops.cuda.movement import transpose
from ops.cuda.softmax import masking
from ops.shapes import LAYOUTS, heads_swap


def attention(q, k, v, mask=None, causal=False, scale=None, bias=None, layout="bhtd"):
    """softmax(scale · q kᵀ + bias) v over the keys each query sees: (..., Tq, dv); (..., Tq, H, dv) for the
    layout "bthd" (``ops.cpu.attention.attention``)."""
    return attention_lse(q, k, v, mask, causal, scale, bias, layout)[0]


def attention_lse(q, k, v, mask=None, causal=False, scale=None, bias=None, layout="bhtd"):
    """(o, L): ``attention``'s output and each query's log-sum-exp, −inf for a query that sees no key
    (``ops.cpu.attention.attention_lse``)."""
    q, k, v = _swap_heads(layout, q, k, v)
    (q3, k3, v3), lead, scale = _prepare(q, k, v, scale)
    out, lse = _forward_pass(q3, k3, v3, scale, _masking(lead, q3, k3, mask, causal, bias))
    flat_lse = lse.reshape(lse.size)
    _replace[blocks(lse.size), THREADS](flat_lse, flat_lse, math.inf, -math.inf)
    out, lse = out.reshape(*lead, q3.shape[1], v3.shape[2]), lse.reshape(*lead, q3.shape[1])
    return _swap_heads(layout, out)[0], _swap_rows(layout, lse)


def attention_backward(g, o, q, k, v, mask=None, causal=False, scale=None, bias=None, layout="bhtd"):
    """The gradients of ``attention`` for the output gradient g, from its output o, stacked in one array
    (3, ..., max(Tq, Tk), max(d, dv)) that is 0 outside them: dq = grads[0, ..., :Tq, :d],
    dk = grads[1, ..., :Tk, :d], dv = grads[2, ..., :Tk, :dv]; (3, ..., max(Tq, Tk), H, max(d, dv)) for "bthd"."""
    if layout == "bthd":
        return _swap_heads(layout, attention_backward(*_swap_heads(layout, g, o, q, k, v), mask, causal, scale,
                                                       bias))[0]
    (q3, k3, v3), lead, scale = _prepare(q, k, v, scale)
    return _weight_grads(q3, k3, v3, lead, scale, *_backward_state(g, o, q3, k3, v3, lead, scale, mask, causal, bias))


def attention_block_backward(g, q, k, v, lse, delta, mask=None, causal=False, scale=None, bias=None, layout="bhtd"):
    """The gradients (stacked as ``attention_backward``'s) of one block of keys of a larger attention, given its
    queries' log-sum-exp L over all its keys and D = rowsum(dO ∘ O) − dL (``ops.cpu.attention``'s twin)."""
    if tuple(lse.shape) != tuple(q.shape[:-1]) or tuple(delta.shape) != tuple(q.shape[:-1]):
        raise ValueError(f"attention_block_backward needs lse and delta shaped {tuple(q.shape[:-1])}, the queries' "
                         f"rows; got {tuple(lse.shape)} and {tuple(delta.shape)}")
    if layout == "bthd":
        return _swap_heads(layout, attention_block_backward(*_swap_heads(layout, g, q, k, v), *_swap_rows(
            layout, lse, delta), mask, causal, scale, bias))[0]
    (q3, k3, v3), lead, scale = _prepare(q, k, v, scale)
    count, tq = q3.shape[:2]
    rows = empty((count * tq,), q.dtype)                # L = −inf (no key) read as +inf: every P is then 0
    _replace[blocks(rows.size), THREADS](rows, lse.reshape(count * tq), -math.inf, math.inf)
    masks = _masking(lead, q3, k3, mask, causal, bias)
    return _weight_grads(q3, k3, v3, lead, scale, g.reshape(count, tq, v3.shape[2]), rows.reshape(count, tq),
                         delta.reshape(count, tq), masks)


def _weight_grads(q3, k3, v3, lead, scale, g3, lse, row_dots, masks):
    """dq, dk, dv stacked, from the rows' L and D: the kernels of a thread per key, then of a thread per query."""
    (count, tq, d), (tk, width) = q3.shape, v3.shape[1:]
    grads = full((3, count, max(tq, tk), max(d, width)), 0, q3.dtype)
    _backward_keys[_grid(count, tk), ATTENTION_TILE](grads[1], grads[2], g3, q3, k3, v3, lse, row_dots, scale,
                                                     *masks)
    _backward_queries[_grid(count, tq), ATTENTION_TILE](grads[0], g3, q3, k3, v3, lse, row_dots, scale, *masks)
    return grads.reshape(3, *lead, *grads.shape[2:])


def attention_bias_backward(g, o, q, k, v, mask=None, causal=False, scale=None, bias=None, layout="bhtd"):
    """The gradient of ``attention`` with respect to its bias at the scores' shape (..., H, Tq, Tk): 0 where a key
    takes no part."""
    g, o, q, k, v = _swap_heads(layout, g, o, q, k, v)
    (q3, k3, v3), lead, scale = _prepare(q, k, v, scale)
    count, tq, tk = q3.shape[0], q3.shape[1], k3.shape[1]
    g3, lse, row_dots, masks = _backward_state(g, o, q3, k3, v3, lead, scale, mask, causal, bias)
    dz = empty((count, tq, tk), q.dtype)
    _bias_grad[blocks(dz.size), THREADS](dz, g3, q3, k3, v3, lse, row_dots, scale, *masks)
    return dz.reshape(*lead, tq, tk)


def _swap_heads(layout, *xs):
    """The arrays with (..., T, H, f) ↔ (..., H, T, f) swapped (copies) when the layout is "bthd": the kernels
    read heads first. A layout that is neither is refused."""
    if layout not in LAYOUTS:
        raise ValueError(f"attention layout must be one of {LAYOUTS}, got {layout!r}")
    return xs if layout == "bhtd" else tuple(transpose(x, heads_swap(x.ndim)) for x in xs)


def _swap_rows(layout, *xs):
    """Rows' values (..., T, H) ↔ (..., H, T) when the layout is "bthd"; one array, or a tuple of several."""
    swapped = xs if layout == "bhtd" else tuple(transpose(x, tuple(range(x.ndim - 2)) + (x.ndim - 1, x.ndim - 2))
                                                for x in xs)
    return swapped[0] if len(swapped) == 1 else swapped


def _backward_state(g, o, q3, k3, v3, lead, scale, mask, causal, bias):
    """What the backward kernels read: g as (batch, Tq, dv), the log-sum-exp L, D = rowsum(dO ∘ O), the masking."""
    count, tq, width = q3.shape[0], q3.shape[1], v3.shape[2]
    g3, o3 = g.reshape(count, tq, width), o.reshape(count, tq, width)
    masks = _masking(lead, q3, k3, mask, causal, bias)
    _, lse = _forward_pass(q3, k3, v3, scale, masks)
    row_dots = empty((count, tq), q3.dtype)
    _row_dots[blocks(count * tq), THREADS](row_dots, g3, o3)
    return g3, lse, row_dots, masks


def _forward_pass(q3, k3, v3, scale, masks):
    """(output, log-sum-exp L) of (batch, T, features) operands."""
    count, tq, _ = q3.shape
    out, lse = empty((count, tq, v3.shape[2]), q3.dtype), empty((count, tq), q3.dtype)
    _forward[_grid(count, tq), ATTENTION_TILE](out, lse, q3, k3, v3, scale, np.finfo(q3.dtype).min, *masks)
    return out, lse


def _prepare(q, k, v, scale):
    """q, k, v as (batch, T, features) views, the batch shape, and the scale in q's dtype."""
    (*lead, tq, d), (*k_lead, tk, dk), (*v_lead, tv, dv) = q.shape, k.shape, v.shape
    if not lead == k_lead == v_lead or dk != d or tv != tk or not q.dtype == k.dtype == v.dtype:
        raise ValueError(f"attention needs q (..., Tq, d), k (..., Tk, d), v (..., Tk, dv) of one batch shape and "
                         f"dtype; got {tuple(q.shape)} {q.dtype}, {tuple(k.shape)} {k.dtype}, "
                         f"{tuple(v.shape)} {v.dtype}")
    if max(d, dv) > HEAD_DIM_MAX:
        raise ValueError(f"the fused attention kernels take up to {HEAD_DIM_MAX} features per head, got {max(d, dv)}")
    count = math.prod(lead)
    views = q.reshape(count, tq, d), k.reshape(count, tk, d), v.reshape(count, tk, dv)
    return views, tuple(lead), q.dtype.type(1 / math.sqrt(d) if scale is None else scale)


def _masking(lead, q3, k3, mask, causal, bias):
    """The mask, its strides and the scores' shape (..., Tq, Tk), causal (ops/cuda/softmax.py's masking), and the
    flat bias (a 0 when there is none) with its strides over the scores."""
    mask, strides, shape, causal, _ = masking(lead + (q3.shape[1], k3.shape[1]), mask, causal)
    bias = _no_bias(q3.dtype) if bias is None else bias
    if bias.dtype != q3.dtype or len(bias.shape) > len(shape) or \
            any(n not in (1, t) for n, t in zip(bias.shape[::-1], shape[::-1])):
        raise ValueError(f"bias of shape {tuple(bias.shape)} {bias.dtype} does not broadcast to the scores {shape} "
                         f"{q3.dtype}")
    return mask, strides, shape, causal, flat(bias), broadcast_strides(bias.shape, shape)


@functools.cache
def _no_bias(dtype):
    """The bias of no bias: one 0, broadcast to every shape."""
    return full((), 0, dtype)


def _grid(count, rows):
    """(row tiles, batch entries) blocks, each of ATTENTION_TILE threads."""
    return blocks(rows, ATTENTION_TILE), blocks(count, 1)


@cuda.jit(device=True)
def _sees(mask, mask_strides, shape, causal, b, i, j, tq, tk):
    """Whether query i of batch entry b sees key j (scores of ``shape``, (..., tq, tk))."""
    return j < _key_end(i, tq, tk, causal) and mask[offset((b * tq + i) * tk + j, shape, mask_strides)]


@cuda.jit(device=True)
def _bias_at(bias, bias_strides, shape, b, i, j, tq, tk):
    """The bias of query i and key j of batch entry b."""
    return bias[offset((b * tq + i) * tk + j, shape, bias_strides)]


@cuda.jit(device=True)
def _load_tile(tile, x, b, start):
    """tile[r, :] = x[b, start + r, :] for the ATTENTION_TILE rows, zeros past the end; by the whole block."""
    rows, width = x.shape[1], x.shape[2]
    for e in range(cuda.threadIdx.x, ATTENTION_TILE * width, ATTENTION_TILE):
        r, c = divmod(e, width)
        tile[r, c] = x[b, start + r, c] if start + r < rows else x.dtype.type(0)


@cuda.jit(device=True)
def _load_row(row, x, b, i):
    """row[c] = x[b, i, c] for the features c: a thread's own row i, zeros when i is past the end."""
    live = i < x.shape[1]
    for c in range(x.shape[2]):
        row[c] = x[b, i, c] if live else x.dtype.type(0)


@cuda.jit(device=True)
def _store_row(x, b, i, row, n):
    """x[b, i, c] = row[c] for c < n."""
    for c in range(n):
        x[b, i, c] = row[c]


@cuda.jit(device=True)
def _clear(row, n):
    """row[c] = 0 for c < n."""
    for c in range(n):
        row[c] = row.dtype.type(0)


@cuda.jit(device=True)
def _dot(a, b, n):
    s = a.dtype.type(0)
    for c in range(n):
        s += a[c] * b[c]
    return s


@cuda.jit
def _forward(out, lse, q, k, v, scale, lowest, mask, mask_strides, shape, causal, bias, bias_strides):
    """out and L, a thread per query (``total`` is the running sum l)"""
    k_tile = cuda.shared.array((ATTENTION_TILE, HEAD_DIM_MAX), q.dtype)
    v_tile = cuda.shared.array((ATTENTION_TILE, HEAD_DIM_MAX), q.dtype)
    q_row = cuda.local.array(HEAD_DIM_MAX, q.dtype)
    o = cuda.local.array(HEAD_DIM_MAX, q.dtype)
    s = cuda.local.array(ATTENTION_TILE, q.dtype)
    count, tq, d = q.shape
    tk, dv = v.shape[1], v.shape[2]
    zero, minus_inf, plus_inf = q.dtype.type(0), q.dtype.type(-math.inf), q.dtype.type(math.inf)
    for b in range(cuda.blockIdx.y, count, cuda.gridDim.y):
        for i0 in range(cuda.blockIdx.x * ATTENTION_TILE, tq, cuda.gridDim.x * ATTENTION_TILE):
            i = i0 + cuda.threadIdx.x
            live = i < tq
            _load_row(q_row, q, b, i)
            _clear(o, dv)
            m, total = lowest, zero
            for j0 in range(0, tk, ATTENTION_TILE):
                _load_tile(k_tile, k, b, j0)
                _load_tile(v_tile, v, b, j0)
                cuda.syncthreads()
                tile_max = lowest
                for jj in range(ATTENTION_TILE):
                    seen = live and j0 + jj < tk and _sees(mask, mask_strides, shape, causal, b, i, j0 + jj, tq, tk)
                    s[jj] = scale * _dot(q_row, k_tile[jj], d) + _bias_at(bias, bias_strides, shape, b, i, j0 + jj,
                                                                          tq, tk) if seen else minus_inf
                    tile_max = mathfn.maximum(tile_max, s[jj])
                if tile_max > m:
                    correction = mathfn.exp(m - tile_max)
                    total *= correction
                    for c in range(dv):
                        o[c] *= correction
                    m = tile_max
                for jj in range(ATTENTION_TILE):
                    p = mathfn.exp(s[jj] - m)
                    total += p
                    for c in range(dv):
                        o[c] += p * v_tile[jj, c]
                cuda.syncthreads()
            if live:
                for c in range(dv):
                    out[b, i, c] = o[c] / total if total != zero else zero       # NaN too
                lse[b, i] = m + math.log(total) if total != zero else plus_inf


@cuda.jit
def _replace(out, x, old, new):
    """out = x, with new where x == old (flat arrays; out may be x)."""
    for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        out[i] = new if x[i] == old else x[i]


@cuda.jit
def _row_dots(row_dots, g, out):
    """D = sum_c dO * O per query"""
    tq, dv = g.shape[1], g.shape[2]
    for r in range(cuda.grid(1), row_dots.size, cuda.gridsize(1)):
        b, i = divmod(r, tq)
        row_dots[b, i] = _dot(g[b, i], out[b, i], dv)


@cuda.jit
def _backward_keys(dk, dv, g, q, k, v, lse, row_dots, scale, mask, mask_strides, shape, causal, bias, bias_strides):
    """dk and dv, a thread per key"""
    q_tile = cuda.shared.array((ATTENTION_TILE, HEAD_DIM_MAX), q.dtype)
    g_tile = cuda.shared.array((ATTENTION_TILE, HEAD_DIM_MAX), q.dtype)
    k_row = cuda.local.array(HEAD_DIM_MAX, q.dtype)
    v_row = cuda.local.array(HEAD_DIM_MAX, q.dtype)
    dk_row = cuda.local.array(HEAD_DIM_MAX, q.dtype)
    dv_row = cuda.local.array(HEAD_DIM_MAX, q.dtype)
    count, tq, d = q.shape
    tk, width = v.shape[1], v.shape[2]
    for b in range(cuda.blockIdx.y, count, cuda.gridDim.y):
        for j0 in range(cuda.blockIdx.x * ATTENTION_TILE, tk, cuda.gridDim.x * ATTENTION_TILE):
            j = j0 + cuda.threadIdx.x
            live = j < tk
            _load_row(k_row, k, b, j)
            _load_row(v_row, v, b, j)
            _clear(dk_row, d)
            _clear(dv_row, width)
            for i0 in range(0, tq, ATTENTION_TILE):
                _load_tile(q_tile, q, b, i0)
                _load_tile(g_tile, g, b, i0)
                cuda.syncthreads()
                for ii in range(ATTENTION_TILE):
                    i = i0 + ii
                    if live and i < tq and _sees(mask, mask_strides, shape, causal, b, i, j, tq, tk):
                        p = mathfn.exp(scale * _dot(q_tile[ii], k_row, d)
                                       + _bias_at(bias, bias_strides, shape, b, i, j, tq, tk) - lse[b, i])
                        ds = p * (_dot(g_tile[ii], v_row, width) - row_dots[b, i])
                        for c in range(width):
                            dv_row[c] += p * g_tile[ii, c]
                        for c in range(d):
                            dk_row[c] += scale * ds * q_tile[ii, c]
                cuda.syncthreads()
            if live:
                _store_row(dk, b, j, dk_row, d)
                _store_row(dv, b, j, dv_row, width)


@cuda.jit
def _backward_queries(dq, g, q, k, v, lse, row_dots, scale, mask, mask_strides, shape, causal, bias, bias_strides):
    """dq, a thread per query"""
    k_tile = cuda.shared.array((ATTENTION_TILE, HEAD_DIM_MAX), q.dtype)
    v_tile = cuda.shared.array((ATTENTION_TILE, HEAD_DIM_MAX), q.dtype)
    q_row = cuda.local.array(HEAD_DIM_MAX, q.dtype)
    g_row = cuda.local.array(HEAD_DIM_MAX, q.dtype)
    dq_row = cuda.local.array(HEAD_DIM_MAX, q.dtype)
    count, tq, d = q.shape
    tk, width = v.shape[1], v.shape[2]
    for b in range(cuda.blockIdx.y, count, cuda.gridDim.y):
        for i0 in range(cuda.blockIdx.x * ATTENTION_TILE, tq, cuda.gridDim.x * ATTENTION_TILE):
            i = i0 + cuda.threadIdx.x
            live = i < tq
            _load_row(q_row, q, b, i)
            _load_row(g_row, g, b, i)
            _clear(dq_row, d)
            for j0 in range(0, tk, ATTENTION_TILE):
                _load_tile(k_tile, k, b, j0)
                _load_tile(v_tile, v, b, j0)
                cuda.syncthreads()
                for jj in range(ATTENTION_TILE):
                    j = j0 + jj
                    if live and j < tk and _sees(mask, mask_strides, shape, causal, b, i, j, tq, tk):
                        p = mathfn.exp(scale * _dot(q_row, k_tile[jj], d)
                                       + _bias_at(bias, bias_strides, shape, b, i, j, tq, tk) - lse[b, i])
                        ds = p * (_dot(g_row, v_tile[jj], width) - row_dots[b, i])
                        for c in range(d):
                            dq_row[c] += scale * ds * k_tile[jj, c]
                cuda.syncthreads()
            if live:
                _store_row(dq, b, i, dq_row, d)


@cuda.jit
def _bias_grad(dz, g, q, k, v, lse, row_dots, scale, mask, mask_strides, shape, causal, bias, bias_strides):
    """dZ_ij = P_ij (dO_i·v_j − D_i), 0 where query i does not see key j; a thread per score"""
    count, tq, d = q.shape
    tk, width = v.shape[1], v.shape[2]
    for e in range(cuda.grid(1), count * tq * tk, cuda.gridsize(1)):
        r, j = divmod(e, tk)
        b, i = divmod(r, tq)
        dz[b, i, j] = dz.dtype.type(0)
        if _sees(mask, mask_strides, shape, causal, b, i, j, tq, tk):
            p = mathfn.exp(scale * _dot(q[b, i], k[b, j], d) + _bias_at(bias, bias_strides, shape, b, i, j, tq, tk)
                           - lse[b, i])
            dz[b, i, j] = p * (_dot(g[b, i], v[b, j], width) - row_dots[b, i])


KERNELS = kernel_table(attention, attention_backward, attention_bias_backward)
