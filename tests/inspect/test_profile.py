"""The interpreter's per-step hook and the profiler built on it: every kernel call of an executable goes through
``run_node`` once an interpreter is set, with the same results as the executor's own loop; the profile counts each
op's calls per run and sums times per op and per module."""
import numpy as np
import pytest

import attngraph as ag
from attngraph import cli
from attngraph.core.interpreter import Interpreter


class Mlp(ag.Module):
    def __init__(self):
        super().__init__()
        self.hidden = ag.nn.Linear(4, 8)
        self.out = ag.nn.Linear(8, 2)

    def forward(self, x):
        return self.out(ag.tanh(self.hidden(x)))


class Recording(Interpreter):
    def __init__(self):
        super().__init__("cpu")
        self.ops = []

    def run_node(self, node, call, args):
        self.ops.append(node.op)
        return super().run_node(node, call, args)


def test_an_interpreter_set_on_an_executable_runs_every_step_with_the_same_results(rng):
    graph = ag.trace(Mlp(), x=ag.Input(("B", 4)))
    x = rng.standard_normal((3, 4)).astype(np.float32)
    executable = graph.compile()
    fast = executable(x=x)
    executable.interpreter = recording = Recording()
    np.testing.assert_array_equal(executable(x=x), fast)
    assert recording.ops == [node.op for node in executable.graph.nodes if node.kind == "call"]
    assert "matmul" in recording.ops


def test_profile_counts_calls_per_op_and_sums_modules(rng):
    graph = ag.trace(Mlp(), x=ag.Input(("B", 4)))
    report = ag.inspect.profile(graph, runs=3, x=rng.standard_normal((5, 4)).astype(np.float32))
    calls = [node.op for node in graph.compile().graph.nodes if node.kind == "call"]
    assert {op: c / 3 for op, (_, c) in report.ops.items()} == {op: calls.count(op) for op in set(calls)}
    assert report.total == pytest.approx(sum(seconds for seconds, _ in report.ops.values()))
    assert report.total > 0
    hidden, out = report.modules["hidden"][0], report.modules["out"][0]
    assert 0 < hidden + out <= report.total * (1 + 1e-9)
    table = report.table()
    assert "matmul" in table and "hidden" in table and "over 3 runs" in table


def test_profile_refuses_no_runs():
    with pytest.raises(ValueError, match="runs"):
        ag.inspect.profile(ag.trace(ag.tanh, x=ag.Input((2,))), runs=0, x=np.zeros(2, np.float32))


def test_cli_profile_prints_ops_and_modules(capsys):
    assert cli.main(["profile", "gpt", "--tiny", "--runs", "1", "--rows", "50"]) == 0
    out = capsys.readouterr().out
    assert "matmul" in out and "attention_grad" in out and "transformer.layers.0.self_attn" in out
    assert "kernel time per run" in out
