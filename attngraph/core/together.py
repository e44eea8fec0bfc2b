"""Independent long steps run together: pairs of nodes that the executor's fast loop runs at the same time.

A time loop on the CPU (``scan``) runs its steps one after the other, a whole loop on one thread when its batch is
small: a bidirectional encoder's two directions, each 12 steps of a 64-row GRU, took 1.45 ms apiece in seq2seq's
training step while the other core idled. The directions do not read each other, forward or backward, so they can
run at once, each on a core: 2.9 → 1.55 ms a pair (both directions of the forward pass, and of the gradient's).

``paired(order, ops)`` finds such pairs in a schedule: for each node A of ``ops``, the first later node B of
``ops`` of A's shape that does not depend on A. Alike shapes (a recurrence's two directions, two towers) do alike
work, so that neither side idles long while the other finishes: a large loop that would split its rows over both
cores is not held to one of them by a small one beside it. The nodes between them that B depends on move before
A, so that B can follow A at once; everything else keeps its place, so the order stays a valid schedule (B's
ancestors there do not depend on A, or B would). Every node is in one pair at most. The backend runs a pair
(``Backend.together``); each side sees the same inputs and computes what it would alone, bit for bit where its
kernel's results do not depend on the number of threads it is given (the CPU's loops are cut into the same blocks
of rows on any number).
"""
from __future__ import annotations

from .graph import Node


def paired(order: list[Node], ops: frozenset[str]) -> tuple[list[Node], set[Node]]:
    """``order`` rearranged so that each pair's nodes are adjacent, and the first node of each pair."""
    if not ops:
        return order, set()
    order, firsts, taken = list(order), set(), set()
    k = 0
    while k < len(order):
        first = order[k]
        if first.op in ops and first not in taken:
            for j in range(k + 1, len(order)):
                second = order[j]
                if second.op not in ops or second.shape != first.shape or second in taken:
                    continue
                moved = _ancestors_between(first, second, order[k + 1:j])
                if moved is not None:
                    order[k:j + 1] = [*moved, first, second, *(n for n in order[k + 1:j] if n not in moved)]
                    firsts.add(first)
                    taken.update((first, second))
                    k += len(moved)
                    break
        k += 1
    return order, firsts


def _ancestors_between(first: Node, second: Node, between: list[Node]) -> list[Node] | None:
    """The nodes of ``between`` (the schedule after ``first``, before ``second``) that ``second`` depends on, in
    order; None when ``second`` depends on ``first``."""
    window, needed, stack = set(between), set(), [second]
    while stack:
        node = stack.pop()
        if first in node.inputs:
            return None
        for x in node.inputs:
            if x in window and x not in needed:
                needed.add(x)
                stack.append(x)
    return [n for n in between if n in needed]
