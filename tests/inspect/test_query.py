"""networkx queries: nodes by scope and op, a module's subgraph, the path between two nodes."""
import os
import subprocess
import sys
from itertools import pairwise

import networkx as nx

from attngraph.inspect import module_subgraph, nodes_by_op, nodes_by_scope, path_between
from tests.inspect.transformer import forward_graph


def test_queries():
    graph = forward_graph()
    g = graph.to_networkx()
    assert nodes_by_op(g, "softmax") == [n.label for n in graph.nodes if n.op == "softmax"]
    attn = nodes_by_scope(g, "layers.0.attn")
    assert attn and all(g.nodes[v]["scope"].startswith("layers.0.attn") for v in attn)
    assert set(nodes_by_scope(g, "layers.0.attn.w_q")) < set(attn)
    assert not nodes_by_scope(g, "layers.0.att")            # whole names only
    sub = module_subgraph(g, "layers.1")
    assert set(sub) == set(nodes_by_scope(g, "layers.1")) and nx.is_directed_acyclic_graph(sub)
    tokens, output = graph.inputs["tokens"].label, graph.output("output").label
    path = path_between(g, tokens, output)
    assert path[0] == tokens and path[-1] == output and all(g.has_edge(a, b) for a, b in pairwise(path))
    assert path_between(g, output, tokens) == []


def test_importing_attngraph_leaves_networkx_and_the_ufuncs_for_their_first_use():
    """networkx (~70 ms) is imported when a path is asked for, and the elementwise ops' numba ufuncs are made when
    an op first runs: importing attngraph does neither."""
    probe = ("import sys, attngraph; from ops.cpu import elementwise; "
             "print('networkx' in sys.modules, 'dufunc' in vars(elementwise.add))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True,
                         cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    assert out.stdout.split() == ["False", "False"]
