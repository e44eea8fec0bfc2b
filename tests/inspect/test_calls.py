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


class Residual(ag.Module):
    def __init__(self):
        super().__init__()
        self.attn = ag.attention.MultiHeadAttention(8, 2)
        self.norm = ag.nn.LayerNorm(8)

    def forward(self, x):
        return self.norm(x + self.attn(x, x, x))


def test_a_module_called_once_is_one_call_after_the_compiler_moves_nodes_between_its_own():
    """The optimizing passes place fused nodes of other scopes among a call's nodes: that call stays one."""
    from attngraph.core import passes
    model = Residual()
    step = passes.optimize(ag.trace(lambda x: ag.mean(model(x) ** 2), x=ag.Input(("B", "T", 8))).grad())
    calls = [n for n in step.nodes if n.kind == "call"]
    scopes = {c.scope: c.index for path in call_paths(n for n in calls if n.grad_of is None).values() for c in path}
    assert scopes["attn"] == 0 and scopes["norm"] == 0


class Cell(ag.Module):
    """A recurrent cell as nn.recurrent's: its input projected for every step at once, then stepped by a method
    (not ``__call__``), so that the cell itself is never called."""

    def __init__(self):
        super().__init__()
        self.input, self.hidden = ag.nn.Linear(2, 3), ag.nn.Linear(3, 3)

    def project(self, x):
        return self.input(x)

    def step(self, projected, h):
        return ag.tanh(projected + self.hidden(h))


class Unrolled(ag.Module):
    def __init__(self):
        super().__init__()
        self.cell = Cell()

    def forward(self, x):                      # x (B, 4, 2)
        projected = self.cell.project(x)
        h = projected[:, 0] * 0.0
        for t in range(4):
            h = self.cell.step(projected[:, t], h)
        return h


def test_a_cell_never_called_itself_has_a_call_per_run():
    graph = ag.trace(Unrolled(), x=ag.Input((1, 4, 2)))
    paths = call_paths(n for n in graph.nodes if n.kind == "call")
    assert max(c.index for path in paths.values() for c in path if c.scope == "cell") + 1 == 5    # projection + 4 steps
