"""Additive (Bahdanau) scores of every query against every key, and their gradient, each in one pass:

  s[n, i, j] = Σ_h v_h t_h,   t = tanh(a[n, i] + b[n, j])
  with d = g[n, i, j] · v ∘ (1 − t²):   da[n, i] = Σ_j d,   db[n, j] = Σ_i d,   dv = Σ_n,i,j g[n, i, j] t

for a (N, Tq, H), b (N, Tk, H), v (H,). Composed (a broadcast sum, tanh, a product with v) the (N, Tq, Tk, H)
hidden tensor is written and read three times forward and four times backward; here it is never held: the
backward recomputes t. Forward a thread owns rows (n, i); backward whole batch elements n, so that the sums over i
and over j need no atomics. The gradient comes stacked, (N, 3, R, H) for R = max(Tq, Tk), zero-padded: da in part
0, db in part 1, and in row 0 of part 2 each n's share of dv, which the graph sums over n (core/prims/attention.py).
tanh is ``mathfn``'s, the composed graph's; sums run in order, so results are close to the composed graph's, not
bit for bit.
"""
import math

import numpy as np
from numba import prange

from ops.cpu import mathfn
from ops.cpu.threads import parallel_kernel


def additive_scores(a, b, v):
    """s (..., Tq, Tk) for a (..., Tq, H), b (..., Tk, H) of one batch shape and v (H,)."""
    s = _scores(*_batched(a, b), np.ascontiguousarray(v))
    return s.reshape(np.shape(a)[:-1] + np.shape(b)[-2:-1])


def additive_scores_backward(g, a, b, v):
    """(da, db, dv share) stacked as (..., 3, max(Tq, Tk), H) for the gradient g (..., Tq, Tk) of the scores."""
    a3, b3 = _batched(a, b)
    grads = _backward(np.ascontiguousarray(g).reshape(a3.shape[:2] + b3.shape[1:2]), a3, b3,
                      np.ascontiguousarray(v))
    return grads.reshape(np.shape(a)[:-2] + grads.shape[1:])


def _batched(a, b) -> tuple[np.ndarray, np.ndarray]:
    """a and b as C-contiguous (N, T, H) arrays."""
    a, b = np.asarray(a), np.asarray(b)
    return tuple(np.ascontiguousarray(x).reshape((math.prod(x.shape[:-2]),) + x.shape[-2:]) for x in (a, b))


TANH_WORK = 4      # a pair's tanh and multiply-adds, in elements of a pass over memory (PARALLEL_MIN_SIZE's unit):
                   # the pointer's (64, 10, 10, 64) scores, 0.45 ms serial, on threads took its step 0.93x as long


def _work(a, b) -> int:
    """Either kernel's work, for ``parallel_kernel``'s choice of twin: TANH_WORK for each element of the hidden
    tensor (N, Tq, Tk, H)."""
    return TANH_WORK * a.shape[0] * a.shape[1] * b.shape[1] * a.shape[2]


@parallel_kernel(work=lambda a, b, v: _work(a, b), fastmath=mathfn.FASTMATH, error_model="numpy")
def _scores(a, b, v):
    batch, tq, tk, hidden = a.shape[0], a.shape[1], b.shape[1], a.shape[2]
    s = np.empty((batch, tq, tk), a.dtype)
    for r in prange(batch * tq):
        n, i = r // tq, r % tq
        for j in range(tk):
            total = a.dtype.type(0)
            for h in range(hidden):
                total += v[h] * mathfn.tanh(a[n, i, h] + b[n, j, h])
            s[n, i, j] = total
    return s


@parallel_kernel(work=lambda g, a, b, v: _work(a, b), fastmath=mathfn.FASTMATH, error_model="numpy")
def _backward(g, a, b, v):
    batch, tq, tk, hidden = a.shape[0], a.shape[1], b.shape[1], a.shape[2]
    one = a.dtype.type(1)
    grads = np.zeros((batch, 3, max(tq, tk), hidden), a.dtype)
    for n in prange(batch):
        da, db, dv = grads[n, 0], grads[n, 1], grads[n, 2, 0]
        for i in range(tq):
            for j in range(tk):
                gij = g[n, i, j]
                for h in range(hidden):
                    t = mathfn.tanh(a[n, i, h] + b[n, j, h])
                    dv[h] += gij * t
                    d = gij * v[h] * (one - t * t)
                    da[i, h] += d
                    db[j, h] += d
    return grads


KERNELS = {
    "additive_scores": additive_scores,
    "additive_scores_grad": additive_scores_backward,
}
