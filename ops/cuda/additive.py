"""Additive (Bahdanau) scores and their stacked gradient: the contract of ops/cpu/additive.py.

  s[n, i, j] = Σ_h v_h tanh(a[n, i, h] + b[n, j, h])

A thread per score, its loop over the features. The gradient (N, 3, R, H), R = max(Tq, Tk), a thread per element
of it: da[n, i, h] sums over the keys j, db[n, j, h] over the queries i, and row 0 of part 2 is n's share of dv,
Σ_i,j g t; the padding is written 0. No atomics: each element is one thread's sum, recomputing t.
"""
import math

from ops._cuda import cuda, empty
from ops.cuda import mathfn
from ops.cuda.launch import THREADS, blocks


def additive_scores(a, b, v):
    """s (..., Tq, Tk) for a (..., Tq, H), b (..., Tk, H) of one batch shape and v (H,)."""
    a3, b3 = _batched(a), _batched(b)
    s = empty(a3.shape[:2] + b3.shape[1:2], a.dtype)
    _scores[blocks(s.size), THREADS](s.reshape(s.size), a3, b3, v)
    return s.reshape(a.shape[:-1] + b.shape[-2:-1])


def additive_scores_backward(g, a, b, v):
    """(da, db, dv share) stacked as (..., 3, max(Tq, Tk), H) for the gradient g (..., Tq, Tk) of the scores."""
    a3, b3 = _batched(a), _batched(b)
    grads = empty((a3.shape[0], 3, max(a3.shape[1], b3.shape[1]), a3.shape[2]), a.dtype)
    _backward[blocks(grads.size), THREADS](grads.reshape(grads.size), g.reshape(a3.shape[:2] + b3.shape[1:2]),
                                           a3, b3, v)
    return grads.reshape(a.shape[:-2] + grads.shape[1:])


def _batched(x):
    return x.reshape((math.prod(x.shape[:-2]),) + x.shape[-2:])


@cuda.jit
def _scores(s, a, b, v):
    tq, tk = a.shape[1], b.shape[1]
    for e in range(cuda.grid(1), s.size, cuda.gridsize(1)):
        n, i, j = e // (tq * tk), e // tk % tq, e % tk
        total = s.dtype.type(0)
        for h in range(a.shape[2]):
            total += v[h] * mathfn.tanh(a[n, i, h] + b[n, j, h])
        s[e] = total


@cuda.jit
def _backward(grads, g, a, b, v):
    tq, tk, hidden = a.shape[1], b.shape[1], a.shape[2]
    rows = max(tq, tk)
    one = grads.dtype.type(1)
    for e in range(cuda.grid(1), grads.size, cuda.gridsize(1)):
        n, part, r, h = e // (3 * rows * hidden), e // (rows * hidden) % 3, e // hidden % rows, e % hidden
        total = grads.dtype.type(0)
        if part == 0 and r < tq:
            for j in range(tk):
                t = mathfn.tanh(a[n, r, h] + b[n, j, h])
                total += g[n, r, j] * v[h] * (one - t * t)
        elif part == 1 and r < tk:
            for i in range(tq):
                t = mathfn.tanh(a[n, i, h] + b[n, r, h])
                total += g[n, i, r] * v[h] * (one - t * t)
        elif part == 2 and r == 0:
            for i in range(tq):
                for j in range(tk):
                    total += g[n, i, j] * mathfn.tanh(a[n, i, h] + b[n, j, h])
        grads[e] = total


KERNELS = {
    "additive_scores": additive_scores,
    "additive_scores_grad": additive_scores_backward,
}
