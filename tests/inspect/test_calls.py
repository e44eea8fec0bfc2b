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


class Twice(ag.Module):
    def __init__(self):
        super().__init__()
        self.inner = Outer()

    def forward(self, x):
        return self.inner.cell(self.inner.cell(x))      # back to back: no node in between


def test_back_to_back_calls_of_one_module_are_two_calls_forward_and_backward():
    graph = ag.trace(Twice(), x=ag.Input((1, 2)))
    paths = call_paths(n for n in graph.nodes if n.kind == "call")
    assert [p for p in paths.values()] == [(Call("inner", 0), Call("inner.cell", 0))] * 2 + \
        [(Call("inner", 0), Call("inner.cell", 1))] * 2
    backward = [n for n in ag.trace(lambda x: ag.sum(Twice()(x)), x=ag.Input((1, 2))).grad().nodes
                if n.kind == "call" and n.grad_of is not None and n.scope]
    paths = call_paths(backward, backward=True)
    assert {p[-1] for p in paths.values()} == {Call("inner.cell", 0, True), Call("inner.cell", 1, True)}
    made_in = {k: {n.calls[-1][1] for n in backward if paths[n][-1].index == k} for k in (0, 1)}
    assert len(made_in[0]) == len(made_in[1]) == 1 and min(made_in[0]) < min(made_in[1])   # ∇ call k is call k's
