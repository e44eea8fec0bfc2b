"""Moving data on the device: reshape, transpose, broadcast_to, slicing (getitem), its scatter (scatter_slice)
and concatenation; the twins of the NumPy copies that the CPU primitives use.

reshape is a free view (arrays on the device are C-contiguous). Everything else is one kernel, a strided copy
(ops/cuda/layout.py): for every position i of ``shape``,

  dst[dst_at + offset(i, shape, dst_strides)] = src[src_at + offset(i, shape, src_strides)]

A transpose reads with permuted strides, a broadcast with zero strides, a slice with an offset and stepped
strides; scatter_slice and concat write into a view of their output instead.

take_along_axis and put_along_axis (torch.gather, torch.scatter_reduce) follow ops/cpu/movement.py's contract. The
gather reads x with the axis's stride replaced by the index; the scatter gives each output element one thread,
which scans the index entries of its line along the axis in order and reduces those that point at it: no two
threads write one element, repeated indices need no atomics, and "assign" keeps the last, as NumPy's.
"""
import math

from ops._cuda import cuda, empty
from ops.cuda.embedding import first_out_of_range
from ops.cuda.elementwise import full
from ops.cuda.launch import THREADS, blocks
from ops.cuda.layout import broadcast_strides, c_strides, flat, index_view, offset


@cuda.jit
def _strided_copy(shape, dst, dst_at, dst_strides, src, src_at, src_strides):
    size = 1
    for n in shape:
        size *= n
    for i in range(cuda.grid(1), size, cuda.gridsize(1)):
        dst[dst_at + offset(i, shape, dst_strides)] = src[src_at + offset(i, shape, src_strides)]


def _copy(shape, dst, dst_view, src, src_view):
    """Copy ``src`` read as ``src_view`` = (offset, strides) into ``dst`` written as ``dst_view``, over ``shape``."""
    shape = tuple(shape)
    if not shape:           # kernels take at least one axis: a 0-d copy is one element
        shape, dst_view, src_view = (1,), (dst_view[0], (0,)), (src_view[0], (0,))
    if math.prod(shape):
        _strided_copy[blocks(math.prod(shape)), THREADS](shape, flat(dst), *dst_view, flat(src), *src_view)
    return dst


def _dense(shape):
    """The view (offset, strides) of a whole C-contiguous array of ``shape``."""
    return 0, c_strides(shape)


def reshape(x, shape):
    return x.reshape(tuple(shape))


def transpose(x, perm):
    """np.transpose(x, perm) as a new C-contiguous array."""
    shape = tuple(x.shape[p] for p in perm)
    strides = c_strides(x.shape)
    return _copy(shape, empty(shape, x.dtype), _dense(shape), x, (0, tuple(strides[p] for p in perm)))


def broadcast_to(x, shape):
    """np.broadcast_to(x, shape) as a new C-contiguous array."""
    shape = tuple(shape)
    return _copy(shape, empty(shape, x.dtype), _dense(shape), x, (0, broadcast_strides(x.shape, shape)))


def getitem(x, index):
    """x[index] as a new C-contiguous array, for a normalized index (ints, slices, None)."""
    at, shape, strides = index_view(x.shape, index)
    return _copy(shape, empty(shape, x.dtype), _dense(shape), x, (at, strides))


def scatter_slice(g, shape, index):
    """zeros(shape) with g written at [index]: the gradient of getitem."""
    out = full(tuple(shape), 0, g.dtype)
    at, view_shape, strides = index_view(tuple(shape), index)
    return _copy(view_shape, out, (at, strides), g, _dense(view_shape))


def concat(*xs, axis):
    """np.concatenate(xs, axis)."""
    shape = list(xs[0].shape)
    shape[axis] = sum(x.shape[axis] for x in xs)
    out = empty(tuple(shape), xs[0].dtype)
    strides, start = c_strides(shape), 0
    for x in xs:
        _copy(x.shape, out, (start * strides[axis], strides), x, _dense(x.shape))
        start += x.shape[axis]
    return out


def take_along_axis(x, index, axis):
    """np.take_along_axis(x, index, axis) for ``index`` no longer than ``x`` on the other axes."""
    _check_along(index, x.shape, axis)
    out = empty(index.shape, x.dtype)
    if out.size:
        strides = c_strides(x.shape)
        _take_along[blocks(out.size), THREADS](flat(out), flat(x), strides[:axis] + (0,) + strides[axis + 1:],
                                               strides[axis], flat(index), tuple(index.shape))
    return out


REDUCE = ("assign", "sum", "prod", "amax", "amin")


def put_along_axis(x, index, src, axis, reduce):
    """A copy of ``x`` with ``src`` reduced in at ``index`` along ``axis`` (ops/cpu/movement.py's contract)."""
    _check_along(index, x.shape, axis)
    out = _copy(x.shape, empty(x.shape, x.dtype), _dense(x.shape), x, _dense(x.shape))
    if out.size and index.size:
        _put_along[blocks(out.size), THREADS](flat(out), tuple(x.shape), flat(index), tuple(index.shape),
                                              flat(src), axis, REDUCE.index(reduce))
    return out


def _check_along(index, shape, axis):
    bad = first_out_of_range(index, shape[axis]) if index.size else None
    if bad is not None:
        raise IndexError(f"index {bad} is out of bounds for axis {axis} with size {shape[axis]}")


@cuda.jit
def _take_along(out, x, x_strides, axis_stride, index, shape):
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        out[i] = x[offset(i, shape, x_strides) + index[i] * axis_stride]


@cuda.jit
def _put_along(out, shape, index, index_shape, src, axis, reduce):
    for e in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        rest, line, stride, step, target, inside = e, 0, 1, 1, 0, True
        for a in range(len(shape) - 1, -1, -1):
            c = rest % shape[a]
            rest //= shape[a]
            if a == axis:
                target, step = c, stride
            else:
                inside = inside and c < index_shape[a]
                line += c * stride
            stride *= index_shape[a]
        if inside:
            acc = out[e]
            for j in range(index_shape[axis]):
                p = line + j * step
                if index[p] == target:
                    v = src[p]
                    if reduce == 0:
                        acc = v
                    elif reduce == 1:
                        acc += v
                    elif reduce == 2:
                        acc *= v
                    elif acc == acc and (v != v or (v > acc if reduce == 3 else v < acc)):
                        acc = v
            out[e] = acc


def stop_gradient(x):
    return x


KERNELS = {name: globals()[name] for name in ("reshape", "transpose", "broadcast_to", "getitem", "scatter_slice",
                                              "concat", "stop_gradient", "take_along_axis", "put_along_axis")}
