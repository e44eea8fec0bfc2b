"""Module calls: maximal runs of consecutive nodes in or below a scope."""
import attngraph as ag
from attngraph.inspect import Call, call_paths


class Outer(ag.Module):
    def __init__(self):
        super().__init__()
        self.cell = ag.nn.Linear(2, 2)

    def forward(self, x):
        for _ in range(2):
            x = ag.tanh(self.cell(x))           # tanh runs in "", between the calls of "cell"
        return x


def test_calls_are_numbered_in_order_and_nested():
    graph = ag.trace(Outer(), x=ag.Input((1, 2)))
    paths = call_paths(n for n in graph.nodes if n.kind == "call")
    assert [(n.op, p) for n, p in paths.items()] == [
        ("matmul", (Call("cell", 0),)), ("add", (Call("cell", 0),)), ("tanh", ()),
        ("matmul", (Call("cell", 1),)), ("add", (Call("cell", 1),)), ("tanh", ())]
