"""Elementwise fusion: each chain of elementwise ops becomes one ``fused`` node, run as one generated kernel.

A group grows from its last op (its root) backwards through the elementwise ops (``Primitive.elementwise``)
that compute an input of a member, have the root's shape (a smaller one would be recomputed for every element
it is broadcast to), are not an output of the graph, and whose every user is in the group: no value is computed
twice and none that another node reads is lost. The members become the program of one node, which reads the
group's inputs (broadcast as they were; a slice ``x[...]`` that an input is, through its ``views``: one call
instead of two) and writes the root's value. A group of one op becomes a fused node too: its generated kernel is
cached on disk and runs on threads, where the op's ufunc loop is single-threaded and rebuilt in every process
(~0.1 s per op and dtype at the first step).

  sigmoid(x + b) ∘ h + (1 − z) ∘ tanh(u)   →   fused(x, b, h, z, u)        (five ops, one pass)

Each kernel call saves the allocation, the write and the read of every intermediate, and a Python dispatch
per op: a GRU step is ~20 elementwise ops over small (batch, hidden) arrays, where the calls cost more than the
arithmetic. The fused node keeps the root's scope, name and source line; its members' ``grad_of`` links now
point to it, and its ``value`` holds them (debug mode names the one that first makes a NaN); ``unfuse``
expands fused nodes back into them.
"""
from __future__ import annotations

from ops.cpu.fused import MAX_INPUTS

from ..graph import Graph, Node
from ..primitive import lookup
from ..prims.fused import run_program, viewed
from ..prims.movement import sliced_shape
from .dce import dce
from .rewrite import rewrite

MAX_OPS = 64             # instructions of one program: longer chains are split (compile time grows with them)


def fuse_elementwise(graph: Graph) -> Graph:
    groups = _groups(graph)
    member_of = {member: root for root, members in groups.items() for member in members}

    def visit(node, inputs, copy):
        root = member_of.get(node)
        if root is None:
            return copy(node, inputs)
        if node is not root:
            return None                  # computed inside the root's kernel
        members = groups[root]
        outside = list(dict.fromkeys(x for m in members for x in m.inputs if x not in members))
        slot = {x: i for i, x in enumerate(outside)} | {m: len(outside) + k for k, m in enumerate(members)}
        program = tuple((m.op, tuple(slot[x] for x in m.inputs), m.dtype.name) for m in members)
        reads = tuple(_reads(root.shape, x.shape) for x in outside)
        sources = [x.inputs[0] if x.op == "getitem" else x for x in outside]
        views = tuple(x.attrs["index"] if x.op == "getitem" else None for x in outside)
        fused = copy(root, tuple(env[x] for x in sources), op="fused", value=tuple(members),
                     attrs={"program": program, "reads": reads, "views": views, "shape": root.shape})
        for m in members:
            env[m] = fused
        return fused

    env: dict[Node, Node] = {}
    return dce(rewrite(graph, visit, env))          # the slices now read through views go


def unfuse(graph: Graph) -> Graph:
    """The graph with each fused node expanded back into the ops it stands for, with their names, scopes and
    source lines: to draw them, or to run them one by one."""
    def visit(node, inputs, copy):
        if node.op != "fused":
            return copy(node, inputs)
        sliced = viewed(inputs, node.attrs["views"], lambda x, view: copy(
            node.value[0], (x,), op="getitem", attrs={"index": view}, shape=sliced_shape(x.shape, view), dtype=x.dtype))
        return run_program(node.attrs["program"], sliced, lambda k, op, xs, dtype: copy(node.value[k], tuple(xs)))[-1]

    return rewrite(graph, visit)


def _groups(graph: Graph) -> dict[Node, list[Node]]:
    """root → its members in graph order (root last), for every group."""
    users = graph.users()
    outputs = {node.inputs[0] for node in graph.outputs}
    taken: set[Node] = set()
    groups = {}
    for root in reversed(graph.nodes):
        if root in taken or not _fusible(root):
            continue
        members, frontier = {root}, [root]
        while frontier:
            for x in frontier.pop().inputs:
                if x not in members and _fusible(x) and x.shape == root.shape and x not in outputs \
                        and all(u in members for u in users[x]) and len(members) < MAX_OPS \
                        and _inputs(members | {x}) <= MAX_INPUTS:
                    members.add(x)
                    frontier.append(x)
        if _inputs(members) <= MAX_INPUTS:
            taken |= members
            groups[root] = sorted(members, key=lambda n: n.id)
    return groups


def _fusible(node: Node) -> bool:
    return node.kind == "call" and lookup(node.op).elementwise


def _inputs(members: set[Node]) -> int:
    return len({x for m in members for x in m.inputs if x not in members})


def _reads(shape: tuple, input_shape: tuple) -> tuple[int, ...]:
    """For each axis of an input broadcast to ``shape``: the output axis whose index it takes (inputs align on
    the right), or −1 where its size is 1 (index 0)."""
    offset = len(shape) - len(input_shape)
    return tuple(-1 if size == 1 else offset + axis for axis, size in enumerate(input_shape))
