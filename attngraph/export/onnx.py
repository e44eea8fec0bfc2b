"""ONNX export: a traced forward graph written as a standard ONNX model (opset 18) that onnxruntime runs.

    graph = ag.trace(model.eval(), tokens=ag.Input(("B", "T"), "int64"))
    graph.export_onnx("gpt.onnx")                   # or export_onnx(graph, "gpt.onnx", T=128)

What is written:
- the graph's inputs with their dtypes; a symbolic dimension (``"B"``, ``"T"``) becomes an ONNX ``dim_param``,
  and the sizes of reshapes, broadcasts, ranges and masks are read from the inputs' shapes when the model runs,
  so one file serves every batch size and length. Sizes given as keywords (``T=128``) are fixed instead.
  Inputs that no output depends on are left out (``rng_seed``, once dropout is the identity);
- parameters as initializers named by their dotted paths, constants as initializers;
- one ONNX node (or a short chain) per primitive, each named ``scope/op/n17`` with the user's source line as
  its doc string. Fused primitives are written out in standard ops: the compiler's ``fused`` elementwise nodes
  op by op (``core.passes.unfuse``), flash ``attention`` as MatMul, Softmax and its masks, ``gelu`` from Erf or
  Tanh, ``cross_entropy`` as SoftmaxCrossEntropyLoss, ``argsort`` (sort, topk) as TopK's indices; matmul's
  transpose flags become Transpose nodes; a ``scan`` (a time loop, ``ag.scan``) becomes ONNX's Scan over axis 1,
  its body the step's graph converted the same way (``_StepBuilder``);
- the outputs under the graph's output names.

The export is for inference, as ``torch.onnx.export`` in eval mode: ``dropout`` is the identity. Semantics are
attngraph's: masked softmax entries are 0 and a row with nothing allowed is all 0 (never NaN); ``causal``
lets query i see key j ≤ i + Tk − Tq; a cross-entropy whose targets are all ignored is 0. Backward ops
(``*_grad``, scatters) have no ONNX form here: export the forward graph, not ``graph.grad()``.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from functools import reduce
from pathlib import Path

import numpy as np

from ops.shapes import extras, heads_swap, scores_shape

from ..core.dims import Dim, is_symbolic, multiply, symbols
from ..core.graph import Graph, Node, graph_method
from ..core.passes import unfuse
from ..core.body import ROWS, Body, rows_as
from ..errors import BindingError, ExportError
from ..version import __version__

OPSET = 18
INT64_MAX, INT64_MIN = np.iinfo(np.int64).max, np.iinfo(np.int64).min


def onnx_package():
    """The ``onnx`` package, or an ExportError saying how to install it."""
    try:
        import onnx
    except ImportError:
        raise ExportError("ONNX export needs the onnx package: pip install 'attngraph[onnx]'") from None
    return onnx


@graph_method("export_onnx")
def export_onnx(graph: Graph, path, **sizes: int) -> Path:
    """Write ``graph`` to ``path`` as an ONNX model (see the module docstring), atomically; returns the path.
    ``sizes`` fix symbolic dimensions (``T=128``) instead of leaving them to run time."""
    from ..train.files import write_atomically
    model, path = to_onnx(graph, **sizes), Path(path)
    if path.is_dir():
        raise ExportError(f"cannot write the ONNX model to {path}: it is a folder; name a file in it, such as "
                          f"{path / 'model.onnx'}")
    try:
        write_atomically(path, lambda f: f.write(model.SerializeToString()))
    except OSError as e:        # its file name may be the hidden temporary file beside the path
        raise ExportError(f"cannot write the ONNX model to {path}: {e.strerror or e}") from e
    return path


def to_onnx(graph: Graph, **sizes: int):
    """``graph`` as an ``onnx.ModelProto``."""
    onnx = onnx_package()
    builder = _Builder(onnx, graph, sizes)
    body = onnx.helper.make_graph(builder.nodes, "attngraph", builder.inputs(), builder.outputs,
                                  initializer=builder.initializers)
    return onnx.helper.make_model(body, producer_name="attngraph", producer_version=__version__,
                                  opset_imports=[onnx.helper.make_opsetid("", OPSET)])


class _Builder:
    """Converts the nodes the outputs depend on, in order; ``self.names`` maps each to its ONNX value."""

    def __init__(self, onnx, graph: Graph, sizes: dict[str, int]):
        self.onnx, self.graph, self.sizes = onnx, unfuse(graph), dict(sizes)
        self._check_sizes()
        self.initializers = []
        self.taken = set(self.graph.inputs) | set(self.graph.parameters)
        self._convert_all()

    def _convert_all(self) -> None:
        self.nodes, self.outputs = [], []
        self.names: dict[Node, str] = {}
        self.symbols: dict[str, str] = {}       # symbolic dimension -> its 1-D int64 size, read from an input
        self.node: Node | None = None
        for node in self.graph.topological_order():
            self.node = node
            self.names[node] = self._convert(node)

    def _check_sizes(self) -> None:
        known = {s for node in self.graph.inputs.values() for d in node.shape for s in symbols(d)}
        for name, size in self.sizes.items():
            if name not in known:
                raise BindingError(f"the graph has no dimension {name!r}; its symbolic dimensions are "
                                   f"{sorted(known) or 'none'}")
            if isinstance(size, bool) or not isinstance(size, int) or size < 1:
                raise BindingError(f"dimension {name} must be a positive int, got {size!r}")

    def _convert(self, node: Node) -> str:
        if node.op in ("input", "parameter"):
            return node.name if node.op == "input" else self.constant(node.value.data, node.name)
        if node.op == "constant":
            return self.constant(node.value)
        if node.op == "output":
            if node.name in self.taken:
                raise ExportError(f"output {node.name!r} has the name of an input or parameter; ONNX needs distinct "
                                  "names, so rename the output")
            self.taken.add(node.name)
            self.outputs.append(self.value_info(node.name, node))
            return self.op("Identity", self.names[node.inputs[0]], out=node.name)
        convert = CONVERTERS.get(node.op)
        if convert is None:
            raise ExportError(f"cannot export {node.describe()}: the {node.op} primitive has no ONNX form "
                              f"({NO_ONNX_FORM.get(node.op, 'none written')})")
        return convert(self, node, *(self.names[x] for x in node.inputs), **node.attrs)

    # --- values ------------------------------------------------------------------------------------------

    def fresh(self, base: str) -> str:
        name, n = base, 1
        while name in self.taken:
            name, n = f"{base}_{n}", n + 1
        self.taken.add(name)
        return name

    def op(self, op_type: str, *inputs: str, out: str | None = None, **attrs) -> str:
        """Append ONNX node ``op_type`` reading ``inputs`` for the current attngraph node; its one output's name."""
        return self.op_outputs(op_type, *inputs, outs=[out or self.fresh(self.node.label)], **attrs)[0]

    def op_outputs(self, op_type: str, *inputs: str, outs: list[str], **attrs) -> list[str]:
        """``op`` for an ONNX op with several outputs (TopK's values and indices), named ``outs``."""
        name = self.fresh(f"{self.node.scope}/{self.node.op}/{self.node.label}/{op_type}")
        self.nodes.append(self.onnx.helper.make_node(op_type, list(inputs), outs, name=name,
                                                     doc_string=self.node.source, **attrs))
        return outs

    def constant(self, value, name: str | None = None) -> str:
        name = name or self.fresh(f"{self.node.label}/constant")
        self.initializers.append(self.onnx.numpy_helper.from_array(np.asarray(value), name))
        return name

    def scalar(self, value, dtype) -> str:
        return self.constant(np.asarray(value, dtype))

    def ints(self, values) -> str:
        return self.constant(np.array(values, np.int64))

    def cast(self, x: str, dtype) -> str:
        return self.op("Cast", x, to=self.onnx.helper.np_dtype_to_tensor_dtype(np.dtype(dtype)))

    def inputs(self) -> list:
        """The graph's inputs that some exported op reads."""
        read = _names_read(self.nodes)
        return [self.value_info(name, node) for name, node in self.graph.inputs.items() if name in read]

    def value_info(self, name: str, node: Node, shape=None):
        """The type of value ``name``: ``node``'s dtype, and its shape unless ``shape`` is given."""
        return self.onnx.helper.make_tensor_value_info(
            name, self.onnx.helper.np_dtype_to_tensor_dtype(node.dtype),
            [self.fixed(d) for d in (node.shape if shape is None else shape)])

    # --- sizes read at run time --------------------------------------------------------------------------

    def fixed(self, d: Dim) -> Dim:
        """``d`` with the sizes given to the export put in: ``B*T`` with T=5 is ``5*B``."""
        return multiply(*(self.sizes.get(t, t) for t in str(d).split("*")))

    def dim(self, d: Dim) -> str:
        """A 1-D int64 tensor holding dimension ``d``: a constant, or a product of symbols read from inputs."""
        d = self.fixed(d)
        if isinstance(d, int):
            return self.ints([d])
        factors = [self.symbol(t) if t.isidentifier() else self.ints([int(t)]) for t in d.split("*")]
        return reduce(lambda a, b: self.op("Mul", a, b), factors)

    def symbol(self, name: str) -> str:
        if name not in self.symbols:
            source, axis = next((n, a) for n, x in self.graph.inputs.items() for a, d in enumerate(x.shape)
                                if d == name)
            self.symbols[name] = self.op("Shape", source, start=axis, end=axis + 1)
        return self.symbols[name]

    def shape(self, shape) -> str:
        """A 1-D int64 tensor holding ``shape``."""
        fixed = [self.fixed(d) for d in shape]
        if not is_symbolic(fixed):
            return self.ints(fixed)
        return self.op("Concat", *map(self.dim, shape), axis=0)

    def length(self, d: Dim) -> str:
        """Dimension ``d`` as a 0-d int64 tensor."""
        return self.op("Squeeze", self.dim(d), self.ints([0]))

    def offsets(self, tq: Dim, tk: Dim) -> str:
        """The (Tq, Tk) int64 matrix j − i of query i and key j."""
        zero, one = self.scalar(0, np.int64), self.scalar(1, np.int64)
        i = self.op("Unsqueeze", self.op("Range", zero, self.length(tq), one), self.ints([1]))
        return self.op("Sub", self.op("Range", zero, self.length(tk), one), i)

    # --- composite ops -----------------------------------------------------------------------------------

    def masked(self, op_type: str, x: str, shape, dtype, mask: str | None, causal: bool) -> str:
        """Softmax or LogSoftmax over the last axis of ``x`` with attngraph's masks: entries not allowed by
        ``mask`` (True = may attend) or ``causal`` (j ≤ i + Tk − Tq) are 0, and so are rows with none allowed."""
        if causal:
            tq, tk = shape[-2], shape[-1]
            limit = self.op("Sub", self.length(tk), self.length(tq))
            lower = self.op("LessOrEqual", self.offsets(tq, tk), limit)
            mask = lower if mask is None else self.op("And", mask, lower)
        if mask is None:
            return self.op(op_type, x, axis=-1)
        filled = self.op("Where", mask, x, self.scalar(np.finfo(dtype).min, dtype))
        return self.op("Where", mask, self.op(op_type, filled, axis=-1), self.scalar(0, dtype))

    def transposed(self, x: str, ndim: int) -> str:
        return self.op("Transpose", x, perm=list(range(ndim - 2)) + [ndim - 1, ndim - 2])


def _names_read(nodes) -> set[str]:
    """The values ``nodes`` read, those their subgraphs (a Scan's body) read by name from outside included."""
    read = set()
    for node in nodes:
        read.update(node.input)
        for attribute in node.attribute:
            if attribute.HasField("g"):
                read |= _names_read(attribute.g.node)
    return read


class _StepBuilder(_Builder):
    """A scan's body (core/prims/recurrence.py) as the body of an ONNX Scan, converted op by op as the main graph.

    The Scan's state is the carry (rows, C) and its scan inputs one time step of each sequence; the body returns
    the next carry, the first C columns of its row, and the row (rows, P) itself, which the Scan stacks. ONNX's
    Scan has no inputs that every step reads whole, so the constants cʲ are read by name from the enclosing graph,
    as ONNX subgraphs may. The body's batch, the symbol ``rows``, is read from the carry; its other symbols from
    the enclosing graph's inputs. Names and initializers are shared with the enclosing graph (one namespace)."""

    def __init__(self, outer: _Builder, body: Body, consts: tuple[str, ...], batch: Dim):
        self.onnx, self.sizes, self.graph = outer.onnx, outer.sizes, unfuse(body.graph)
        self.outer, self.body, self.batch = outer, body, batch
        self.initializers, self.taken = outer.initializers, outer.taken
        state = body.names[:1 + body.sequences]
        self.bound = {**{name: outer.fresh(f"{outer.node.label}/{name}") for name in state},
                      **dict(zip(body.names[1 + body.sequences:], consts))}
        self._convert_all()

    def _convert(self, node: Node) -> str:
        if node.op == "input":
            return self.bound[node.name]
        if node.op == "output":         # written by ``proto``, as the Scan's two outputs
            return self.names[node.inputs[0]]
        return super()._convert(node)

    def symbol(self, name: str) -> str:
        if name != ROWS:
            return self.outer.symbol(name)
        if name not in self.symbols:
            self.symbols[name] = self.op("Shape", self.bound["carry"], start=0, end=1)
        return self.symbols[name]

    def value_info(self, name: str, node: Node, shape=None):
        """With ``rows`` the enclosing batch."""
        return super().value_info(name, node, rows_as(node.shape if shape is None else shape, self.batch))

    def proto(self):
        """The ONNX GraphProto: inputs the carry and one step of each sequence; outputs the next carry, the row."""
        out = self.graph.outputs[0]
        row = self.names[out]
        carry = self.op("Slice", row, self.ints([0]), self.ints([self.body.carry_size]), self.ints([1]))
        inputs = [self.value_info(self.bound[name], self.graph.inputs[name])
                  for name in self.body.names[:1 + self.body.sequences]]
        outputs = [self.value_info(carry, self.graph.inputs["carry"]), self.value_info(row, out)]
        return self.onnx.helper.make_graph(self.nodes, f"{self.outer.node.label}/body", inputs, outputs)


def _scan(b, node, init, *inputs, body: Body, reverse: bool):
    """ONNX's Scan over axis 1 of the sequences (B, T, …), its stacked rows (B, T, P) on axis 1, the body a
    ``_StepBuilder``. ``reverse`` reads the sequences from the end (direction 1) and prepends each row (direction
    1), so that the rows stay in time order, as attngraph's."""
    sequences, consts = inputs[:body.sequences], inputs[body.sequences:]
    step = _StepBuilder(b, body, consts, node.shape[0])
    count, direction = len(sequences), int(reverse)
    final, rows = b.fresh(f"{node.label}/final"), b.fresh(node.label)
    return b.op_outputs("Scan", init, *sequences, outs=[final, rows], body=step.proto(), num_scan_inputs=count,
                        scan_input_axes=[1] * count, scan_input_directions=[direction] * count,
                        scan_output_axes=[1], scan_output_directions=[direction])[1]


def _reduction(op_type: str) -> Callable:
    def convert(b: _Builder, node: Node, x: str, axes, keepdims) -> str:
        if node.inputs[0].dtype != node.dtype:      # sums of bool and integers are int64
            x = b.cast(x, node.dtype)
        if not axes:                                # ONNX reduces every axis when given none
            return b.op("Identity", x)
        return b.op(op_type, x, b.ints(axes), keepdims=int(keepdims))
    return convert


def _simple(op_type: str) -> Callable:
    return lambda b, node, *xs, **attrs: b.op(op_type, *xs, **attrs)


def _arithmetic(op_type: str, logical: str) -> Callable:
    """``op_type``, or ``logical`` on booleans: NumPy's sum, product, maximum and minimum of booleans are or and
    and, and ONNX's arithmetic takes no booleans."""
    return lambda b, node, x, y: b.op(logical if node.dtype == np.bool_ else op_type, x, y)


def _matmul(b, node, x, y, transpose_a=False, transpose_b=False):
    a, c = node.inputs
    return b.op("MatMul", b.transposed(x, len(a.shape)) if transpose_a else x,
                b.transposed(y, len(c.shape)) if transpose_b else y)


def _softmax(op_type: str) -> Callable:
    return lambda b, node, x, mask=None, *, causal: b.masked(op_type, x, node.shape, node.dtype, mask, causal)


def _attention(b, node, q, k, v, *extra, causal, scale, layout="bhtd"):
    """softmax(scale · q kᵀ + bias, mask, causal) v; in the layout "bthd", between transposes to (..., H, T, f)
    and back."""
    qn, kn = node.inputs[:2]
    names = iter(extra)                         # the mask's, then the bias's
    mask, bias = (None if x is None else next(names) for x in extras(node.inputs[3:]))
    swap = list(heads_swap(len(qn.shape))) if layout == "bthd" else None
    if swap:
        q, k, v = (b.op("Transpose", x, perm=swap) for x in (q, k, v))
    scores = b.op("Mul", b.op("MatMul", q, b.transposed(k, len(kn.shape))), b.scalar(scale, node.dtype))
    if bias is not None:
        scores = b.op("Add", scores, bias)
    probs = b.masked("Softmax", scores, scores_shape(qn.shape, kn.shape, layout), node.dtype, mask, causal)
    out = b.op("MatMul", probs, v)
    return b.op("Transpose", out, perm=swap) if swap else out


def _additive_scores(b, node, a, keys, v):
    """vᵀ tanh(a_i + b_j): the queries and keys unsqueezed to (..., Tq, 1, H) and (..., 1, Tk, H), as composed."""
    rank = len(node.inputs[0].shape)
    hidden = b.op("Tanh", b.op("Add", b.op("Unsqueeze", a, b.ints([rank - 1])),
                               b.op("Unsqueeze", keys, b.ints([rank - 2]))))
    return b.op("MatMul", hidden, v)


def _gelu(b, node, x, bias=None, *, approximate):
    """0.5 z (1 + erf(z / √2)), or 0.5 z (1 + tanh(√(2/π) (z + 0.044715 z³))), z = x (+ bias); 0 below z = −10,
    as attngraph's kernels (ops/cpu/mathfn.py), where the formula gives −inf · 0 = NaN at −inf."""
    z = x if bias is None else b.op("Add", x, bias)
    return b.op("Where", b.op("Less", z, b.scalar(-10, node.dtype)), b.scalar(0, node.dtype),
                _gelu_formula(b, node, z, approximate))


def _gelu_formula(b, node, z, approximate):
    """GELU's formula in ONNX ops (``_gelu``)."""
    def times(a, value):
        return b.op("Mul", a, b.scalar(value, node.dtype))
    if approximate == "tanh":
        cube = b.op("Mul", b.op("Mul", z, z), z)
        phi = b.op("Tanh", times(b.op("Add", z, times(cube, 0.044715)), math.sqrt(2 / math.pi)))
    else:
        phi = b.op("Erf", times(z, 1 / math.sqrt(2)))
    return b.op("Mul", times(z, 0.5), b.op("Add", phi, b.scalar(1, node.dtype)))


def _logaddexp(b, node, x, y):
    """x + ln 2 where x = y (±inf too), else max + ln(1 + e^-|x − y|)."""
    spread = b.op("Log", b.op("Add", b.scalar(1, node.dtype), b.op("Exp", b.op("Neg", b.op("Abs", b.op("Sub", x, y))))))
    return b.op("Where", b.op("Equal", x, y), b.op("Add", x, b.scalar(math.log(2), node.dtype)),
                b.op("Add", b.op("Max", x, y), spread))


def _atan2(b, node, y, x):
    """atan(y/x), plus π·sign(y) where x < 0 (±π/2 where x = 0, from atan(±inf)); ONNX has no Atan2. At y = x = 0
    it is NaN (attngraph: ±0 or ±π, as C's atan2)."""
    pi = b.op("Where", b.op("Less", y, b.scalar(0, node.dtype)), b.scalar(-math.pi, node.dtype),
              b.scalar(math.pi, node.dtype))
    angle = b.op("Atan", b.op("Div", y, x))
    return b.op("Where", b.op("Less", x, b.scalar(0, node.dtype)), b.op("Add", angle, pi), angle)


def _divisions(b, node, x, y):
    """(fmod, the remainder with y's sign, x // y) from ONNX's Mod(fmod=1): the remainder gains y and the
    quotient (x − fmod)/y, exact, loses 1 where fmod ≠ 0 and its sign is not y's. An integer y of 0 is read as 1
    and its results made 0 (attngraph's; integer Mod and Div by 0 are undefined in onnxruntime)."""
    zero = b.scalar(0, node.dtype)
    integer = node.dtype.kind in "iu"
    divisor = b.op("Where", b.op("Equal", y, zero), b.scalar(1, node.dtype), y) if integer else y
    fmod = b.op("Mod", x, divisor, fmod=1)
    off = b.op("And", b.op("Not", b.op("Equal", fmod, zero)),
               b.op("Xor", b.op("Less", fmod, zero), b.op("Less", divisor, zero)))
    remainder = b.op("Where", off, b.op("Add", fmod, divisor), fmod)
    quotient = b.op("Sub", b.op("Div", b.op("Sub", x, fmod), divisor), b.cast(off, node.dtype))
    if integer:
        return tuple(b.op("Where", b.op("Equal", y, zero), zero, v) for v in (fmod, remainder, quotient))
    return fmod, remainder, b.op("Where", b.op("Equal", y, zero), b.op("Div", x, y), b.op("Round", quotient))


def _pads(padding) -> list:
    """attngraph's (top, bottom, left, right) as ONNX's [top, left, bottom, right]."""
    return [padding[0], padding[2], padding[1], padding[3]]


def _pool_attrs(kernel, stride, padding, ceil_mode, **dilation) -> dict:
    return dict(kernel_shape=list(kernel), strides=list(stride), pads=_pads(padding), ceil_mode=int(ceil_mode),
                **{"dilations": list(d) for d in dilation.values()})


def _max_pool2d(b, node, x, **attrs):
    """MaxPool, NaN where the window holds a NaN as attngraph's (onnxruntime's MaxPool skips NaN), and −inf where it
    holds only −inf (onnxruntime's padding gives the lowest finite value there): MaxPools of IsNaN and of x > −inf
    pick those windows out."""
    def windows_with(mask):
        return b.op("Greater", b.op("MaxPool", b.cast(mask, node.dtype), **_pool_attrs(**attrs)),
                    b.scalar(0, node.dtype))
    pooled = b.op("MaxPool", x, **_pool_attrs(**attrs))
    above = windows_with(b.op("Greater", x, b.scalar(-math.inf, node.dtype)))
    pooled = b.op("Where", above, pooled, b.scalar(-math.inf, node.dtype))
    return b.op("Where", windows_with(b.op("IsNaN", x)), b.scalar(math.nan, node.dtype), pooled)


def _max_pool2d_indices(b, node, x, **attrs):
    """MaxPool's Indices, which count over the whole (B, C, H, W) tensor, modulo H·W: PyTorch's index in the plane.
    NaN is read as +inf, so that a window's NaN wins (onnxruntime's MaxPool skips NaN); of several, the first."""
    x = b.op("Where", b.op("IsNaN", x), b.scalar(math.inf, node.inputs[0].dtype), x)
    _, indices = b.op_outputs("MaxPool", x, outs=[b.fresh(node.label), b.fresh(node.label)], **_pool_attrs(**attrs))
    plane = b.op("ReduceProd", b.op("Shape", x, start=2), keepdims=1)
    return b.op("Mod", indices, plane)


def _avg_pool2d(b, node, x, *, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override):
    """AveragePool; with ``divisor_override``, each window's sum (a depthwise Conv of ones, padded at the end as far
    as ceil_mode's last window reaches) over it."""
    if not divisor_override:
        return b.op("AveragePool", x, count_include_pad=int(count_include_pad),
                    **_pool_attrs(kernel, stride, padding, ceil_mode=ceil_mode))
    channels, spatial, size = node.shape[1], node.shape[2:], node.inputs[0].shape[2:]
    if not all(isinstance(n, int) for n in (channels, *spatial, *size)):
        raise ExportError("avg_pool2d with divisor_override exports with concrete channels and sizes only")
    ones = b.constant(np.ones((channels, 1, *kernel), node.dtype))
    pads = list(padding)
    for a in (0, 1):
        pads[2 * a + 1] += max(0, (spatial[a] - 1) * stride[a] + kernel[a] - size[a] - padding[2 * a]
                               - padding[2 * a + 1])
    sums = b.op("Conv", x, ones, strides=list(stride), pads=_pads(pads), group=channels)
    return b.op("Div", sums, b.scalar(divisor_override, node.dtype))


def _adaptive(b, node, x, size, reduce_op: str) -> str:
    """Adaptive pooling as PyTorch's windows, floor(i·L/n) to ceil((i + 1)·L/n), each a Slice reduced by
    ``reduce_op`` and concatenated, one spatial axis after the other (max of maxima, mean of means of equal rows)."""
    for axis, (length, count) in enumerate(zip(node.inputs[0].shape[2:], size), start=2):
        bounds = [(i * length // count, -(-(i + 1) * length // count)) for i in range(count)]
        parts = [b.op(reduce_op, b.op("Slice", x, b.ints([start]), b.ints([end]), b.ints([axis])), b.ints([axis]),
                      keepdims=1) for start, end in bounds]
        x = b.op("Concat", *parts, axis=axis) if len(parts) > 1 else parts[0]
    return x


def _adaptive_max_pool2d(b, node, x, *, size):
    """NaN where the window holds a NaN, as attngraph's (onnxruntime's ReduceMax skips NaN)."""
    nan_window = _adaptive(b, node, b.cast(b.op("IsNaN", x), node.dtype), size, "ReduceMax")
    return b.op("Where", b.op("Greater", nan_window, b.scalar(0, node.dtype)), b.scalar(math.nan, node.dtype),
                _adaptive(b, node, x, size, "ReduceMax"))


def _getitem(b, node, x, index):
    """One Slice over the indexed axes (an int i as i:i+1, squeezed after), then the new (None) axes inserted."""
    sliced, squeezed, inserted = [], [], []
    axis = out = 0
    for item in index:
        if item is None:
            inserted.append(out)
            out += 1
            continue
        if not isinstance(item, slice):
            sliced.append((axis, item, INT64_MAX if item == -1 else item + 1, 1))
            squeezed.append(axis)
        else:
            out += 1
            if item != slice(None):
                sliced.append((axis, *_bounds(item)))
        axis += 1
    if sliced:
        axes, starts, ends, steps = map(b.ints, zip(*sliced))
        x = b.op("Slice", x, starts, ends, axes, steps)
    if squeezed:
        x = b.op("Squeeze", x, b.ints(squeezed))
    if inserted:
        x = b.op("Unsqueeze", x, b.ints(inserted))
    return x if sliced or inserted else b.op("Identity", x)


def _bounds(item: slice) -> tuple[int, int, int]:
    """(start, end, step) of ONNX's Slice for a Python slice: the two agree on negative and out-of-range
    bounds, and an omitted bound is the end the step goes to (INT64_MIN: before the first element)."""
    step = 1 if item.step is None else item.step
    start = item.start if item.start is not None else 0 if step > 0 else INT64_MAX
    stop = item.stop if item.stop is not None else INT64_MAX if step > 0 else INT64_MIN
    return start, stop, step


def _size(b, node, x, axes, dtype):
    """The number of elements over ``axes``, in ``dtype`` (what ``mean`` divides by)."""
    if not axes:
        return b.scalar(1, dtype)
    return b.cast(b.op("ReduceProd", b.shape([node.inputs[0].shape[a] for a in axes]), keepdims=0), dtype)


def _var(b, node, x, axes, correction, keepdims):
    """Σ(x − mean)² / max(0, n − correction) over ``axes``."""
    mean = b.op("ReduceMean", x, b.ints(axes), keepdims=1) if axes else x      # ONNX reduces all axes given none
    centered = b.op("Sub", x, mean)
    squares = b.op("Mul", centered, centered)
    total = b.op("ReduceSum", squares, b.ints(axes), keepdims=int(keepdims)) if axes else squares
    count = b.op("Sub", _size(b, node, x, axes, node.dtype), b.scalar(correction, node.dtype))
    return b.op("Div", total, b.op("Max", count, b.scalar(0, node.dtype)))


def _cross_entropy(b, node, logits, targets, ignore_index):
    """Mean over the targets not equal to ``ignore_index`` of −log softmax(logits)[target]; 0 if all are."""
    shape = node.inputs[0].shape
    rows = b.op("Reshape", logits, b.shape((multiply(*shape[:-1]), shape[-1])))
    targets = b.op("Reshape", b.cast(targets, np.int64), b.ints([-1]))
    if ignore_index is None:
        return b.op("SoftmaxCrossEntropyLoss", rows, targets, reduction="mean")
    total = b.op("SoftmaxCrossEntropyLoss", rows, targets, reduction="sum", ignore_index=ignore_index)
    kept = b.cast(b.op("Not", b.op("Equal", targets, b.scalar(ignore_index, np.int64))), node.dtype)
    return b.op("Div", total, b.op("Max", b.op("ReduceSum", kept, keepdims=0), b.scalar(1, node.dtype)))


def _arg_extreme(op_type: str) -> Callable:
    """ArgMax or ArgMin over the last axis, but the first NaN of a row that holds one, as attngraph's and torch's
    (onnxruntime's skip NaN); booleans as int32."""
    def convert(b, node, x):
        dtype = node.inputs[0].dtype
        found = b.op(op_type, b.cast(x, np.int32) if dtype == np.bool_ else x, axis=-1, keepdims=0)
        if dtype.kind != "f":
            return found
        nan = b.cast(b.op("IsNaN", x), np.int32)
        any_nan = b.cast(b.op("ReduceMax", nan, b.ints([-1]), keepdims=0), np.bool_)
        return b.op("Where", any_nan, b.op("ArgMax", nan, axis=-1, keepdims=0), found)
    return convert


def _argsort(b, node, x, k, descending):
    """The indices output of TopK, which orders equal elements by index as the stable sort does."""
    count = b.dim(node.inputs[0].shape[-1]) if k is None else b.ints([k])
    values = b.fresh(f"{node.label}/values")
    return b.op_outputs("TopK", x, count, outs=[values, b.fresh(node.label)], largest=int(descending))[1]


def _cumsum(b, node, x, reverse):
    """CumSum over the last axis, bool and integers summed in int64."""
    if node.inputs[0].dtype != node.dtype:
        x = b.cast(x, node.dtype)
    return b.op("CumSum", x, b.scalar(-1, np.int64), reverse=int(reverse))


def _relative_distance(b, node, q, k, max_distance):
    """clip(j − i, −max_distance, max_distance) + max_distance."""
    qn, kn = node.inputs
    offsets = b.op("Min", b.offsets(qn.shape[-2], kn.shape[-2]), b.scalar(max_distance, np.int64))
    return b.op("Add", b.op("Max", offsets, b.scalar(-max_distance, np.int64)), b.scalar(max_distance, np.int64))


CONVERTERS: dict[str, Callable] = {
    **{op: _simple(op_type) for op, op_type in [
        ("sub", "Sub"), ("div", "Div"), ("pow", "Pow"), ("neg", "Neg"), ("exp", "Exp"), ("log", "Log"),
        ("sqrt", "Sqrt"), ("tanh", "Tanh"), ("sigmoid", "Sigmoid"), ("relu", "Relu"), ("erf", "Erf"), ("abs", "Abs"), ("sin", "Sin"), ("cos", "Cos"),
        ("clip", "Clip"), ("where", "Where"), ("equal", "Equal"),
        ("less", "Less"), ("less_equal", "LessOrEqual"), ("greater", "Greater"),
        ("greater_equal", "GreaterOrEqual"), ("logical_and", "And"), ("logical_or", "Or"),
        ("logical_not", "Not"), ("stop_gradient", "Identity"), ("gather", "Gather"), ("concat", "Concat"),
        ("transpose", "Transpose")]},
    "add": _arithmetic("Add", "Or"),
    "mul": _arithmetic("Mul", "And"),
    "maximum": _arithmetic("Max", "Or"),
    "minimum": _arithmetic("Min", "And"),
    "rsqrt": lambda b, node, x: b.op("Reciprocal", b.op("Sqrt", x)),
    "silu": lambda b, node, x: b.op("Mul", x, b.op("Sigmoid", x)),
    "softplus": lambda b, node, x, beta, threshold: b.op(
        "Where", b.op("Greater", b.op("Mul", x, beta), threshold), x,
        b.op("Div", b.op("Softplus", b.op("Mul", x, beta)), beta)),
    **{op: _simple(op_type) for op, op_type in [
        ("floor", "Floor"), ("ceil", "Ceil"), ("round", "Round"), ("sign", "Sign"), ("isnan", "IsNaN"),
        ("isinf", "IsInf"), ("tan", "Tan"), ("asin", "Asin"), ("acos", "Acos"), ("atan", "Atan"), ("sinh", "Sinh"),
        ("cosh", "Cosh"), ("asinh", "Asinh"), ("acosh", "Acosh"), ("atanh", "Atanh")]},
    "trunc": lambda b, node, x: b.op("Where", b.op("Less", x, b.scalar(0, node.dtype)), b.op("Ceil", x),
                                     b.op("Floor", x)),
    "isfinite": lambda b, node, x: b.op("Not", b.op("Or", b.op("IsNaN", x), b.op("IsInf", x))),
    "log2": lambda b, node, x: b.op("Div", b.op("Log", x), b.scalar(math.log(2), node.dtype)),
    "log10": lambda b, node, x: b.op("Div", b.op("Log", x), b.scalar(math.log(10), node.dtype)),
    "exp2": lambda b, node, x: b.op("Pow", b.scalar(2, node.dtype), x),
    "expm1": lambda b, node, x: b.op("Sub", b.op("Exp", x), b.scalar(1, node.dtype)),
    "log1p": lambda b, node, x: b.op("Log", b.op("Add", x, b.scalar(1, node.dtype))),
    "logaddexp": _logaddexp,
    "copysign": lambda b, node, x, y: b.op("Where", b.op("Less", y, b.scalar(0, node.dtype)),
                                           b.op("Neg", b.op("Abs", x)), b.op("Abs", x)),
    "atan2": _atan2,
    "fmod": lambda b, node, x, y: _divisions(b, node, x, y)[0],
    "remainder": lambda b, node, x, y: _divisions(b, node, x, y)[1],
    "floor_divide": lambda b, node, x, y: _divisions(b, node, x, y)[2],
    **{op: _simple(op_type) for op, op_type in [
        ("bitwise_and", "BitwiseAnd"), ("bitwise_or", "BitwiseOr"), ("bitwise_xor", "BitwiseXor"),
        ("bitwise_not", "BitwiseNot")]},
    "not_equal": lambda b, node, x, y: b.op("Not", b.op("Equal", x, y)),
    "astype": lambda b, node, x, dtype: b.cast(x, dtype),
    "dropout": lambda b, node, x, seed, p, key: b.op("Identity", x),
    "sum": _reduction("ReduceSum"),
    "prod": _reduction("ReduceProd"),
    "max": _reduction("ReduceMax"),
    "min": _reduction("ReduceMin"),
    "logsumexp": _reduction("ReduceLogSumExp"),
    "size": _size,
    "var": _var,
    "matmul": _matmul,
    "reshape": lambda b, node, x, shape: b.op("Reshape", x, b.shape(shape), allowzero=1),
    "broadcast_to": lambda b, node, x, shape: b.op("Expand", x, b.shape(shape)),
    "getitem": _getitem,
    "take_along_axis": lambda b, node, x, index, axis: b.op("GatherElements", x, b.cast(index, np.int64), axis=axis),
    "put_along_axis": lambda b, node, x, index, src, axis, reduce: b.op(
        "ScatterElements", x, b.cast(index, np.int64), src, axis=axis,
        reduction={"assign": "none", "sum": "add", "prod": "mul", "amax": "max", "amin": "min"}[reduce]),
    "arange": lambda b, node, x, axis: b.op("Range", b.scalar(0, np.int64), b.length(node.shape[0]),
                                            b.scalar(1, np.int64)),
    "relative_distance": _relative_distance,
    "argmax": _arg_extreme("ArgMax"),
    "argmin": _arg_extreme("ArgMin"),
    "argsort": _argsort,
    "cumsum": _cumsum,
    "softmax": _softmax("Softmax"),
    "log_softmax": _softmax("LogSoftmax"),
    "layer_norm": lambda b, node, x, weight, bias, eps: b.op("LayerNormalization", x, weight, bias, axis=-1,
                                                             epsilon=eps),
    "gelu": _gelu,
    "attention": _attention,
    "additive_scores": _additive_scores,
    "cross_entropy": _cross_entropy,
    "conv2d": lambda b, node, x, w, *, stride, padding, dilation, groups: b.op(
        "Conv", x, w, strides=list(stride), pads=_pads(padding), dilations=list(dilation), group=groups),
    "conv_transpose2d": lambda b, node, x, w, *, stride, padding, output_padding, dilation, groups: b.op(
        "ConvTranspose", x, w, strides=list(stride), pads=_pads(padding), output_padding=list(output_padding),
        dilations=list(dilation), group=groups),
    "max_pool2d": _max_pool2d,
    "max_pool2d_indices": _max_pool2d_indices,
    "avg_pool2d": _avg_pool2d,
    "adaptive_avg_pool2d": lambda b, node, x, *, size: _adaptive(b, node, x, size, "ReduceMean"),
    "adaptive_max_pool2d": _adaptive_max_pool2d,
    "scan": _scan,
}
"""attngraph primitive -> ``convert(builder, node, *input values, **node.attrs)``, returning the output's value.
``_simple`` ops pass their attributes on (concat's axis, transpose's perm)."""

NO_ONNX_FORM: dict[str, str] = {
    **dict.fromkeys(("adaptive_avg_pool2d_grad", "adaptive_max_pool2d_grad", "additive_scores_grad",
                     "attention_bias_grad", "attention_grad",
                     "avg_pool2d_grad", "conv2d_weight_grad", "cross_entropy_grad", "gelu_grad", "layer_norm_grad",
                     "layer_norm_params_grad", "log_softmax_grad", "max_pool2d_grad", "ring_attention_grad",
                     "scatter_add", "scatter_slice", "softmax_grad"),
                    "a backward op: export the forward graph, not graph.grad()"),
    "fused": "the exporter unfuses it first; a graph holding one was not made by the compiler",
    "ring_attention": "attention split over MPI ranks; export the model with scaled_dot_product_attention",
    **dict.fromkeys(("left_shift", "right_shift"), "ONNX's BitShift takes unsigned integers only"),
    "bitcast": f"ONNX's BitCast came in opset 26; attngraph writes opset {OPSET}",
    "cumprod": "ONNX has no running product (exp of a CumSum of logs is wrong at zeros and negative values)",
    "logcumsumexp": "ONNX has no running log-sum-exp (a CumSum of exponentials overflows)",
    "cumarg": "ONNX has no running arg-maximum or arg-minimum (cummax, cummin)",
}
"""The primitives refused, each with the reason the error gives: every primitive has a converter or a line here
(tests/test_op_checklist.py)."""
