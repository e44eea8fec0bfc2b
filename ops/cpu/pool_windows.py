"""Pooling's window loops (ops/cpu/conv.py): each output's window, given by the spans (first, step, taps, padded)
of its rows and columns (conv.py's ``_span``), reduced to its first largest element (the last NaN) or to its sum,
and the kernels that run them over the (B, C) planes.

A loop over a window of runtime size costs ~3 ns a tap here; with the window's size a constant, LLVM unrolls it
(a 2×2 max pool ~20x faster, benchmarks/MEASUREMENTS.md). ``specialized(kh, kw)`` therefore loads this module's
source again with ``WINDOW = (kh, kw)``: each window's loops run over kh × kw taps, skipping those past its own
(a window cut by the input's border has fewer). This module itself, ``WINDOW = (0, 0)``, loops over each window's
own taps: adaptive pooling's windows, whose sizes vary, and the CUDA kernels (ops/cuda/conv.py) use it.
The commonest max pool, 2 × 2 windows at stride 2 that the border cuts none of, has its loops written out
(``max_pool_2x2`` and its backward, conv.py choosing them): the window loops' results, bit for bit, 2-4x faster.
"""
import functools
import math
import sys
from pathlib import Path

import numpy as np
from numba import njit, prange, types
from numba.extending import overload

from ops.cpu.threads import parallel_kernel

WINDOW = (0, 0)
LARGEST_SPECIALIZED = 8     # windows up to 8 × 8 get their own loops


def specialized(kh: int, kw: int):
    """This module with its window loops over kh × kw taps (compiled once per size; this module itself when the
    window is larger than LARGEST_SPECIALIZED)."""
    if max(kh, kw) > LARGEST_SPECIALIZED or min(kh, kw) < 1:
        return sys.modules[__name__]
    return _loaded(kh, kw)


@functools.cache
def _loaded(kh: int, kw: int):
    from ops.cpu.fused import load_source
    source = Path(__file__).read_text()
    return load_source(source.replace("\nWINDOW = (0, 0)\n", f"\nWINDOW = ({kh}, {kw})\n", 1))


@njit(cache=True)
def _at(spans, i):
    """Output i's span as a tuple (no array view, which costs a reference count per output)."""
    return spans[i, 0], spans[i, 1], spans[i, 2], spans[i, 3]


@njit(cache=True)
def _window_max(plane, r, s):
    """(flat position in ``plane`` (H, W), value) of the first largest element (the last NaN; the window's first,
    −inf, when all are −inf) of the window whose row and column spans are r and s."""
    W = plane.shape[1]
    best, at = plane.dtype.type(-math.inf), r[0] * W + s[0]
    for t in range(WINDOW[0] if WINDOW[0] else r[2]):
        if t < r[2]:
            for u in range(WINDOW[1] if WINDOW[1] else s[2]):
                if u < s[2]:
                    v = plane[r[0] + t * r[1], s[0] + u * s[1]]
                    if v > best or math.isnan(v):
                        best, at = v, (r[0] + t * r[1]) * W + s[0] + u * s[1]
    return at, best


@njit(cache=True)
def _window_sum(plane, r, s):
    """The sum of the window of row and column spans r and s in ``plane`` (0 outside the input)."""
    total = plane.dtype.type(0)
    for t in range(WINDOW[0] if WINDOW[0] else r[2]):
        if t < r[2]:
            for u in range(WINDOW[1] if WINDOW[1] else s[2]):
                if u < s[2]:
                    total += plane[r[0] + t * r[1], s[0] + u * s[1]]
    return total


@njit(cache=True)
def _window_divisor(r, s, include_pad, divisor):
    """What a window's sum is divided by: ``divisor`` when not 0, else the window's size up to the end of the
    padding (``include_pad``) or inside the input (PyTorch's rule); 1 for a window empty of input."""
    if r[2] * s[2] == 0:
        return 1
    return divisor if divisor != 0 else r[3] * s[3] if include_pad else r[2] * s[2]


def _kept(window, out):
    """The part of ``_window_max``'s (position, value) that ``out`` holds: the position if it is of integers."""


@overload(_kept, inline="always")
def _kept_for(window, out):
    if isinstance(out.dtype, types.Integer):
        return lambda window, out: window[0]
    return lambda window, out: window[1]


@parallel_kernel
def max_pool(x, rows, cols, out):
    """``out`` (B, C, Ho, Wo): each window's largest value, or, where ``out`` is int64, where it lies (its flat
    position in the plane). Chosen when compiling, so that the values' loop leaves the positions out: a (32, 16,
    24, 24) 2×2 pool 0.36 ms against 1.05 writing both."""
    B, C = x.shape[:2]
    for bc in prange(B * C):
        plane, kept = x[bc // C, bc % C], out[bc // C, bc % C]
        for i in range(rows.shape[0]):
            for j in range(cols.shape[0]):
                kept[i, j] = _kept(_window_max(plane, _at(rows, i), _at(cols, j)), kept)
    return out


@parallel_kernel
def max_pool_backward(g, x, rows, cols):
    B, C = x.shape[:2]
    dx = np.zeros_like(x)
    for bc in prange(B * C):
        plane, grad, out = x[bc // C, bc % C], g[bc // C, bc % C], dx[bc // C, bc % C].reshape(-1)
        for i in range(rows.shape[0]):
            for j in range(cols.shape[0]):
                out[_window_max(plane, _at(rows, i), _at(cols, j))[0]] += grad[i, j]
    return dx


@njit(cache=True, inline="always")
def _takes(v, best):
    """Whether a window's next tap v takes the place of the largest so far: larger, or NaN (the last NaN is kept)."""
    return (v > best) | (v != v)


@parallel_kernel
def max_pool_2x2(x, out):
    """``max_pool``'s values for 2 × 2 windows at stride 2 from the corner, none cut by the border, written out: the
    four taps of a window read from two rows and compared in order (``_takes``), with selects, no spans or loops
    over taps; 3x faster than the window loops for a (32, 16, 24, 24) input."""
    B, C, Ho, Wo = out.shape
    for bc in prange(B * C):
        plane, pooled = x[bc // C, bc % C], out[bc // C, bc % C]
        for i in range(Ho):
            top, bottom, row = plane[2 * i], plane[2 * i + 1], pooled[i]
            for j in range(Wo):
                m = top[2 * j]
                m = top[2 * j + 1] if _takes(top[2 * j + 1], m) else m
                m = bottom[2 * j] if _takes(bottom[2 * j], m) else m
                row[j] = bottom[2 * j + 1] if _takes(bottom[2 * j + 1], m) else m
    return out


@parallel_kernel
def max_pool_backward_2x2(g, x):
    """``max_pool_backward`` for the windows of ``max_pool_2x2``: each element lies in one window at most, so dx is
    written once, g on the window's first largest element and 0 on its other three (2.5x faster)."""
    B, C, Ho, Wo = g.shape
    dx = np.zeros_like(x)
    zero = x.dtype.type(0)
    for bc in prange(B * C):
        plane, grad, out = x[bc // C, bc % C], g[bc // C, bc % C], dx[bc // C, bc % C]
        for i in range(Ho):
            top, bottom, up, down, row = plane[2 * i], plane[2 * i + 1], out[2 * i], out[2 * i + 1], grad[i]
            for j in range(Wo):
                second = _takes(top[2 * j + 1], top[2 * j])
                m = top[2 * j + 1] if second else top[2 * j]
                third = _takes(bottom[2 * j], m)
                m = bottom[2 * j] if third else m
                which = 3 if _takes(bottom[2 * j + 1], m) else 2 if third else 1 if second else 0
                up[2 * j], up[2 * j + 1] = (row[j] if which == 0 else zero), (row[j] if which == 1 else zero)
                down[2 * j], down[2 * j + 1] = (row[j] if which == 2 else zero), (row[j] if which == 3 else zero)
    return dx


@parallel_kernel
def avg_pool(x, rows, cols, include_pad, divisor):
    B, C = x.shape[:2]
    y = np.empty((B, C, rows.shape[0], cols.shape[0]), x.dtype)
    for bc in prange(B * C):
        plane, out = x[bc // C, bc % C], y[bc // C, bc % C]
        for i in range(rows.shape[0]):
            for j in range(cols.shape[0]):
                out[i, j] = _window_sum(plane, _at(rows, i), _at(cols, j)) / _window_divisor(
                    _at(rows, i), _at(cols, j), include_pad, divisor)
    return y


@parallel_kernel
def avg_pool_backward(g, dx, rows, cols, include_pad, divisor):
    B, C = dx.shape[:2]
    for bc in prange(B * C):
        grad, out = g[bc // C, bc % C], dx[bc // C, bc % C]
        for i in range(rows.shape[0]):
            r = _at(rows, i)
            for j in range(cols.shape[0]):
                c = _at(cols, j)
                share = grad[i, j] / _window_divisor(r, c, include_pad, divisor)
                for t in range(WINDOW[0] if WINDOW[0] else r[2]):
                    if t < r[2]:
                        for u in range(WINDOW[1] if WINDOW[1] else c[2]):
                            if u < c[2]:
                                out[r[0] + t * r[1], c[0] + u * c[1]] += share
    return dx
