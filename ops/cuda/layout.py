"""Array layout for the CUDA kernels: element strides, broadcasting by zero strides, strided views.

Kernels take their arrays flattened (1-D, C order) together with the shape they are read as and a tuple of
strides counted in elements. A stride of 0 repeats an axis, which is how an input is broadcast without a
copy; other strides describe transposes and slices. ``offset`` turns the flat C-order position of an element of
``shape`` into its position in such an array. Shapes and strides are tuples, so that kernels are compiled once
per rank, never per size.
"""
import math

from ops._cuda import cuda


def c_strides(shape) -> tuple[int, ...]:
    """Element strides of a C-contiguous array of ``shape``."""
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= n
    return tuple(reversed(strides))


def broadcast_strides(shape, target) -> tuple[int, ...]:
    """Strides that read a C-contiguous array of ``shape`` as the larger ``target`` shape (NumPy broadcasting):
    one per axis of ``target``, 0 on the axes ``shape`` lacks or has as 1."""
    own = (0,) * (len(target) - len(shape)) + c_strides(shape)
    padded = (1,) * (len(target) - len(shape)) + tuple(shape)
    return tuple(0 if n == 1 and t != 1 else s for n, t, s in zip(padded, target, own))


def sliced_broadcast(shape, index, target) -> tuple[int, tuple[int, ...]]:
    """(offset, strides) that read ``x[index]``, for a C-contiguous ``x`` of ``shape`` and a basic index, as the
    larger ``target`` shape: one stride per axis of ``target``, 0 where the slice lacks the axis or has it as 1."""
    start, view, strides = index_view(shape, index)
    pad = len(target) - len(view)
    return start, (0,) * pad + tuple(0 if n == 1 and t != 1 else s for n, t, s in zip(view, target[pad:], strides))


def index_view(shape, index) -> tuple[int, tuple[int, ...], tuple[int, ...]]:
    """(offset, shape, strides) in elements of ``x[index]`` for a C-contiguous ``x`` of ``shape`` and a normalized
    index: a tuple of ints, slices and None, one entry per axis used (as the ``getitem`` primitive holds)."""
    strides = c_strides(shape)
    offset, out_shape, out_strides, axis = 0, [], [], 0
    for item in index:
        if item is None:
            out_shape.append(1)
            out_strides.append(0)
            continue
        n, stride = shape[axis], strides[axis]
        axis += 1
        if isinstance(item, slice):
            start, stop, step = item.indices(n)
            out_shape.append(len(range(start, stop, step)))
            out_strides.append(stride * step)
            offset += start * stride
        else:
            offset += (item % n) * stride
    return offset, tuple(out_shape) + tuple(shape[axis:]), tuple(out_strides) + strides[axis:]


def flat(a):
    """A 1-D view of the C-contiguous device array ``a`` (0-d arrays become one element)."""
    return a.reshape(math.prod(a.shape))


def rows(a):
    """A (R, T) view of the C-contiguous device array ``a``: its rows along the last axis."""
    *lead, t = a.shape
    return a.reshape(math.prod(lead), t)


@cuda.jit(device=True)
def offset(i, shape, strides):
    """Position, in an array read with ``strides``, of the element at flat C-order position ``i`` of ``shape``."""
    at = 0
    for d in range(len(shape) - 1, -1, -1):
        at += (i % shape[d]) * strides[d]
        i //= shape[d]
    return at
