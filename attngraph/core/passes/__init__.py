"""Graph passes, run by ``graph.compile`` before the schedule is built; each a function Graph -> Graph
written as one loop over the nodes (see ``rewrite``):

  fold            constant subgraphs and shape-only ops evaluated once, at compile time
  fuse            transposes absorbed into matmuls, a bias add into the GELU after it
  fuse_attention  composed attention (and its gradient) into the fused flash-style primitive
  read_heads_in_place  attention over heads split from projections made to read them where they are
  simplify        transpose and reshape chains composed, broadcasts left to the kernels, x·1, x+0 dropped
  share_scans     a time loop and its gradient's forward loop (the same, keeping residuals) run as one
  cse             duplicate computations merged
  dce             nodes that no output depends on dropped
  fuse_elementwise  chains of elementwise ops made one generated kernel each (``fused``; ``unfuse`` undoes it)

``optimize(graph)`` runs them in that order; ``optimize(graph, elementwise=False)`` stops before the
elementwise fusion. Optimizing takes a small fraction of a training step and leaves fewer kernel calls and a faster step;
fusion into matmuls matters most, as the transposes it removes are full copies.

Debug mode (``attngraph.core.debug``) runs the user's graph as traced, node for node. Every node of an
optimized graph keeps the scope, name, source line and ``grad_of`` of the user's node it stands for, so
errors and drawings name the user's code.
"""
from ..graph import Graph
from .attention import fuse_attention, read_heads_in_place
from .cse import cse
from .dce import dce
from .fold import fold
from .fuse import fuse
from .fuse_elementwise import fuse_elementwise, unfuse
from .scans import share_scans
from .simplify import simplify

PASSES = (fold, fuse, fuse_attention, read_heads_in_place, share_scans, simplify, cse, dce, fuse_elementwise)


def optimize(graph: Graph, elementwise: bool = True) -> Graph:
    for run in PASSES if elementwise else PASSES[:-1]:
        graph = run(graph)
    return graph
