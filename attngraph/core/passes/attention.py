"""Attention fusion: the composed attention that modules trace, and the gradient autodiff derives from it,
become the fused flash-style primitive and its backward kernel.

Attention modules trace softmax(q kᵀ · c) v as separate nodes, so that the weights can be drawn and read
back; unless something does read them, their Tq × Tk scores and weights are only work and memory. After
``fuse`` has absorbed the transposes into the matmuls, a site reads

  forward    s = matmul(q, k, transpose_b)    z = mul(s, c)   [z = add(z, bias)]   p = softmax(z[, mask], causal)
             o = matmul(p, v)
  backward   dv = matmul(p, g, transpose_a)   dp = matmul(g, v, transpose_b)   dz = softmax_grad(dp, p)
             ds = mul(dz, c)   dq = matmul(ds, k)   dkᵀ = matmul(q, ds, transpose_a)   [dz read for the bias]

for the gradient g of o, and becomes

  o = attention(q, k, v[, mask][, bias], causal, scale=c)   grads = attention_grad(g, o, q, k, v[, mask][, bias], ...)
  dq, dk, dv = the three parts of grads                      dkᵀ = transpose(dk)
  dz = attention_bias_grad(g, o, q, k, v[, mask], bias, ...) where the bias's gradient reads it

Then ``read_heads_in_place`` makes every attention primitive (those fused here and those the user called,
``ag.scaled_dot_product_attention``) whose q, k and v are heads split from projections, (..., T, H, d) →
(..., H, T, d), by a transpose or by indexing a transposed array, read the untransposed arrays
(``layout="bthd"``); its results are transposed back in the graph, where ``simplify`` cancels them against the
transposes that merge the heads and those of the gradients: a layer's eight copies of its heads go (four
forward, four backward).

A site is fused only when nothing else reads s, z, p, dp or ds (an attention map made an output keeps the
composed graph), c is a positive scalar constant, a bias is float and does not widen the scores, q, k and
v share their batch shape, and, when there is a backward, the fused gradient can hold Tq and Tk
(``prims.attention.packable``; the forward alone takes any lengths, as in a cached decoding step). Without
a backward, only the forward is fused; parts of the backward that are not there (no dv for constant values,
no bias gradient for a constant bias) are not made.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ops.shapes import heads_swap

from ..graph import Graph, Node
from ..primitive import lookup
from ..prims.attention import extras, gradient_parts, packable
from ..prims.movement import sliced_shape
from .rewrite import rewrite


@dataclass(eq=False)
class Site:
    q: Node
    k: Node
    v: Node
    mask: tuple[Node, ...]                      # the mask, then the bias: each there or not
    causal: bool
    scale: float
    output: Node
    inner: tuple[Node, ...]                     # the nodes fusion removes, the forward's first
    g: Node | None = None                       # the output's gradient, when there is a backward
    gradients: dict[Node, int] = field(default_factory=dict)    # replaced node → part (0 dq, 1 dkᵀ, 2 dv, 3 dz)
    fused: list = field(default_factory=list)   # the new output node, then the new attention_grad node


def fuse_attention(graph: Graph) -> Graph:
    live = set(graph.topological_order())       # autodiff and ``fuse`` leave nodes nothing reads
    users = {node: [u for u in readers if u in live] for node, readers in graph.users().items()}
    sites = {}
    for node in graph.nodes:
        site = _match(node, users)
        if site is not None:
            sites.update({n: site for n in (site.output, *site.inner, *site.gradients)})
    if not sites:
        return graph
    env: dict[Node, Node] = {}

    def visit(node, inputs, copy):
        site = sites.get(node)
        if site is None:
            # a node reading one that fusion removes is itself read by no output (it was checked): drop it
            return None if any(x is None for x in inputs) else copy(node, inputs)
        if node in site.inner:
            return None
        operands = tuple(env[x] for x in (site.q, site.k, site.v, *site.mask))
        attrs = {"causal": site.causal, "scale": site.scale}
        if node is site.output:
            site.fused.append(_made(copy, node, "attention", operands, attrs))
            weights = site.inner.index(node.inputs[0])
            env.update({n: site.fused[0] for n in site.inner[:weights + 1]})    # it stands for the scores and weights too
            return site.fused[0]
        backward = (env[site.g], site.fused[0], *operands)
        if site.gradients[node] == 3:
            return _made(copy, node, "attention_bias_grad", backward, attrs)
        if len(site.fused) == 1:
            site.fused.append(_made(copy, node, "attention_grad", backward, attrs))
        grads, part = site.fused[1], site.gradients[node]
        value = _indexed(copy, node, grads, gradient_parts(*operands[:3], grads)[part])
        if part == 1:                           # the graph wants dkᵀ
            rank = len(node.shape)
            value = copy(node, (value,), op="transpose", attrs={"perm": tuple(range(rank - 2)) + (rank - 1, rank - 2)})
        return value

    return rewrite(graph, visit, env)


def read_heads_in_place(graph: Graph) -> Graph:
    """The attention primitives whose q, k and v are heads split from projections, (..., T, H, d) → (..., H, T, d),
    made to read them in place (``layout="bthd"``), however the heads were split: ``transpose(reshape(x))`` per
    projection, or ``qkv[i]`` of one projection reshaped to (B, T, 3, H, d) and transposed to (3, B, H, T, d)
    (nanoGPT's fused ``c_attn``), which becomes ``x[:, :, i]`` of the reshaped projection. The output, the output
    gradient g and the stacked gradients are swapped back by transposes, and the gradients' parts are read
    through them (``through_transpose``): ``simplify`` cancels these against the transposes that split and merge
    the heads in the user's graph and in its gradient."""
    standins = set()                        # the transposes that stand for a heads-first stacked gradient

    def visit(node, inputs, copy):
        if node.op == "getitem" and inputs[0] in standins:
            index, perm = through_transpose(inputs[0], node.attrs["index"])
            part = _indexed(copy, node, inputs[0].inputs[0], index)
            return copy(node, (part,), op="transpose", attrs={"perm": perm})
        if node.op not in ATTENTION or node.attrs.get("layout", "bhtd") != "bhtd":
            return copy(node, inputs)
        first = 0 if node.op == "attention" else 2          # the gradients read g and o before q, k, v
        heads = [_tokens_first(x, node, copy) for x in inputs[first:first + 3]]
        if not all(heads):
            return copy(node, inputs)
        operands = (*[_swapped(copy, node, x) for x in inputs[:first]], *heads, *inputs[first + 3:])
        made = _made(copy, node, node.op, operands, {**node.attrs, "layout": "bthd"})
        if node.op == "attention_bias_grad":                # the scores' gradient: (..., H, Tq, Tk) either way
            return made
        swapped = _swapped(copy, node, made)
        if node.op == "attention_grad":
            standins.add(swapped)
        return swapped

    return rewrite(graph, visit)


ATTENTION = ("attention", "attention_grad", "attention_bias_grad")


def _made(copy, node: Node, op: str, inputs: tuple, attrs: dict) -> Node:
    shape, dtype = lookup(op).infer(*inputs, **attrs)
    return copy(node, inputs, op=op, attrs=attrs, shape=shape, dtype=dtype)


def _swapped(copy, node: Node, x: Node) -> Node:
    """x with the tokens' and the heads' axes swapped: (..., T, H, f) ↔ (..., H, T, f)."""
    perm = heads_swap(len(x.shape))
    return copy(node, (x,), op="transpose", attrs={"perm": perm}, shape=tuple(x.shape[p] for p in perm))


def _indexed(copy, node: Node, x: Node, index: tuple) -> Node:
    return copy(node, (x,), op="getitem", attrs={"index": index}, shape=sliced_shape(x.shape, index))


def _tokens_first(x: Node, node: Node, copy) -> Node | None:
    """y (..., T, H, d) when x (..., H, T, d) is y with those axes swapped: the transpose's input, or a new
    ``getitem`` of the array that x indexes through a transpose; None when x is neither."""
    swap = heads_swap(len(x.shape)) if len(x.shape) >= 3 else None
    if x.op == "transpose" and tuple(x.attrs["perm"]) == swap:
        return x.inputs[0]
    if x.op == "getitem" and x.inputs[0].op == "transpose":
        moved = through_transpose(x.inputs[0], x.attrs["index"])
        if moved is not None and moved[1] == swap:
            return _indexed(copy, node, x.inputs[0].inputs[0], moved[0])
    return None


def through_transpose(t: Node, index: tuple) -> tuple[tuple, tuple] | None:
    """(index', perm') with t[index] = x[index'].transpose(perm') for t = transpose(x, perm), an index of ints and
    slices (None when it holds a new axis): the index moved to the axes of x, and what is left of the transpose."""
    if any(item is None or item is Ellipsis for item in index):
        return None
    perm = tuple(t.attrs["perm"])
    items = tuple(index) + (slice(None),) * (len(perm) - len(index))
    moved = [slice(None)] * len(perm)
    for axis, item in zip(perm, items):
        moved[axis] = item
    kept = [axis for axis, item in enumerate(moved) if not isinstance(item, int)]
    return tuple(moved), tuple(kept.index(axis) for axis, item in zip(perm, items) if not isinstance(item, int))


def _flags(node) -> tuple[bool, bool]:
    return bool(node.attrs.get("transpose_a")), bool(node.attrs.get("transpose_b"))


def _scalar(node) -> float | None:
    return float(node.value.reshape(())) if node.op == "constant" and node.value.size == 1 else None


def _match(output: Node, users: dict) -> Site | None:
    """The site whose output is ``output``, when the whole pattern is there and private to it."""
    if output.op != "matmul" or _flags(output) != (False, False) or output.inputs[0].op != "softmax":
        return None
    p, v = output.inputs
    logits, *mask = p.inputs
    z, bias = _biased(logits)
    mask += [] if bias is None else [bias]
    if z.op != "mul":
        return None
    s, c = z.inputs if _scalar(z.inputs[1]) is not None else z.inputs[::-1]
    scale = _scalar(c)
    if scale is None or not scale > 0 or s.op != "matmul" or _flags(s) != (False, True):
        return None
    q, k = s.inputs
    if not (q.shape[:-2] == k.shape[:-2] == v.shape[:-2]) or s.shape != z.shape or users[s] != [z] \
            or users[z] != [logits if bias is not None else p] or users[logits] != [p]:
        return None
    site = Site(q, k, v, tuple(mask), p.attrs["causal"], scale, output, tuple(dict.fromkeys((s, z, logits, p))))
    backward = [n for n in users[p] if n is not output]
    return site if not backward or packable(q.shape[-2], k.shape[-2]) and _match_backward(site, backward, users) \
        else None


def _biased(logits: Node) -> tuple[Node, Node | None]:
    """(scaled scores, bias) when the softmax reads logits = add(scaled scores, bias) with a float bias that
    does not widen the scores; else (logits, None)."""
    if logits.op != "add":
        return logits, None
    a, b = logits.inputs
    scores, bias = (a, b) if a.op == "mul" else (b, a)
    if scores.op != "mul" or scores.shape != logits.shape or not np.issubdtype(bias.dtype, np.floating):
        return logits, None
    return scores, bias


def _match_backward(site: Site, users_of_p: list, users: dict) -> bool:
    """Complete ``site`` with its backward; False when the backward is not the pattern's."""
    p = site.output.inputs[0]
    grads = [n for n in users_of_p if n.op == "softmax_grad"]
    if len(grads) != 1 or grads[0].inputs[1] is not p or len(grads[0].inputs) != 2:
        return False
    dz = grads[0]
    dp = dz.inputs[0]
    if dp.op != "matmul" or _flags(dp) != (False, True) or dp.inputs[1] is not site.v or users[dp] != [dz]:
        return False
    scaled = [n for n in users[dz] if n.op == "mul" and n.inputs[0] is dz and _scalar(n.inputs[1]) == site.scale]
    if len(scaled) != 1 or len(users[dz]) > 1 and extras(site.mask)[1] is None:
        return False
    site.g, ds = dp.inputs[0], scaled[0]
    for n in users_of_p:
        if n is not dz:
            if n.op != "matmul" or _flags(n) != (True, False) or n.inputs != (p, site.g):
                return False
            site.gradients[n] = 2
    for n in users[ds]:
        if n.op == "matmul" and _flags(n) == (False, False) and n.inputs == (ds, site.k):
            site.gradients[n] = 0
        elif n.op == "matmul" and _flags(n) == (True, False) and n.inputs == (site.q, ds):
            site.gradients[n] = 1
        else:
            return False
    if len(users[dz]) > 1:
        site.gradients[dz] = 3                  # the bias's gradient reads it
        site.inner += (dp, ds)
    else:
        site.inner += (dp, dz, ds)
    return True
