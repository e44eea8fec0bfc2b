"""A ``scan`` in the summary and the FLOP counts: its body's work × T steps, attributed to the modules its body
calls as the unrolled loop's would be; the parameters its body reads counted once."""
import numpy as np
import pytest

import attngraph as ag
from attngraph.cli import main
from attngraph.core import functional as F
from attngraph.inspect import node_flops, summary, total_flops
from attngraph.inspect.flops import binding, loop_flops
from attngraph.nn.recurrent import GRU


class Unrolled(ag.Module):
    """The GRU encoder's loop written out: ``cell.step`` once per time step, the input projected once."""

    def __init__(self, cell):
        super().__init__()
        self.cell = cell

    def forward(self, x):
        projected, h, states = self.cell.project(x), self.cell.initial_state(x), []
        for t in range(x.shape[1]):
            h = self.cell.step(projected[:, t], h)
            states.append(h)
        return F.stack(states, axis=1), h


def graphs(length=5):
    encoder = GRU(8, 16, rng=np.random.default_rng(0))
    scanned = ag.trace(encoder, x=ag.Input(("B", "T", 8)))
    unrolled = ag.trace(Unrolled(encoder.cell), x=ag.Input(("B", length, 8)))
    return encoder, scanned, unrolled


def test_a_gru_as_one_scan_counts_the_flops_of_its_unrolled_loop():
    encoder, scanned, unrolled = graphs()
    assert [n.op for n in scanned.nodes].count("scan") == 1 and "scan" not in [n.op for n in unrolled.nodes]
    gates = 2 * 16 * 48 + 48                        # h @ U + c for the three gates, per example and step
    cell = 16 * (2 * (1 + 6) + (1 + 1 + 6) + 4)      # r, z: add, sigmoid; n: mul, add, tanh; h': sub, 2 mul, add
    projection = 5 * (2 * 8 * 48 + 48)
    assert total_flops(unrolled, B=3) == 3 * (projection + 5 * (gates + cell))
    assert total_flops(scanned, B=3, T=5) == total_flops(unrolled, B=3) == 42_240


def test_the_summary_of_the_scan_is_the_summary_of_the_unrolled_loop():
    encoder, scanned, unrolled = graphs()
    rows = {r["module"]: r for r in summary(scanned, model=encoder, B=3, T=5).rows}
    expected = {r["module"]: r for r in summary(unrolled, B=3).rows}
    assert list(rows) == list(expected) == ["cell", "cell.input", "cell.hidden"]
    for module in rows:
        assert {k: rows[module][k] for k in ("calls", "flops", "parameters", "trainable", "input", "output")} == \
               {k: expected[module][k] for k in ("calls", "flops", "parameters", "trainable", "input", "output")}
    assert [rows[m]["calls"] for m in rows] == [5, 1, 5]             # the hidden Linear once per step
    assert rows["cell.hidden"]["flops"] == 5 * 3 * (2 * 16 * 48 + 48)
    assert (rows["cell.hidden"]["input"], rows["cell.hidden"]["output"]) == ("3×16", "3×48")    # one step's
    assert rows["cell.hidden"]["type"] == "Linear"


def test_the_parameters_a_body_reads_are_counted_once():
    encoder = GRU(8, 16, bidirectional=True)
    graph = ag.trace(encoder, x=ag.Input(("B", "T", 8)))
    s = summary(graph, B=2, T=4)
    assert [n.op for n in graph.nodes].count("scan") == 2
    assert s.parameters == s.trainable == encoder.num_parameters() == 2 * (8 * 48 + 48 + 16 * 48 + 48)
    assert s.parameter_bytes == 4 * s.parameters
    assert sum(r["parameters"] for r in s.rows if r["depth"] == 1) == s.parameters
    assert all(r["type"] != "tied" for r in s.rows)             # the scans read the hidden Linears' weights
    assert s.flops == total_flops(graph, B=2, T=4)


def test_a_memory_of_its_own_length_is_bound_from_the_scan_s_input():
    """A step attending over a memory (B, S, H): S is bound from the memory the scan is given, not left unbound."""
    def attend(x, memory):
        def step(h, x_t):
            weights = F.softmax(F.sum(memory * F.expand_dims(h, 1), axis=-1), axis=-1)          # (B, S)
            h = F.tanh(F.sum(F.expand_dims(weights, -1) * memory, axis=1) + x_t)
            return h, h
        return F.scan(step, F.zeros_like(x[:, 0]), x)[1]

    graph = ag.trace(attend, x=ag.Input(("B", "T", 4)), memory=ag.Input(("B", "S", 4)))
    scan = next(n for n in graph.nodes if n.op == "scan")
    assert scan.attrs["body"].graph.inputs["c0"].shape == ("rows", "S", 4)
    b, s, h = 2, 5, 4
    step = 4 * b * s * h + 5 * b * s + 7 * b * h         # two products and sums, softmax, add and tanh
    bindings = binding(graph, B=b, T=3, S=s)
    assert node_flops(scan, bindings) == 3 * step == 798
    assert sum(loop_flops(scan, bindings).values()) == node_flops(scan, bindings)
    assert node_flops(scan, binding(graph, B=b, T=3, S=2 * s)) > 3 * step         # S is read, not counted as 1


def test_the_graph_with_a_scan_exports_to_networkx():
    graph = graphs()[1]
    g = graph.to_networkx()
    scan = next(n for n in graph.nodes if n.op == "scan")
    assert g.nodes[scan.label]["op"] == "scan" and g.nodes[scan.label]["shape"] == ("B", "T", 16)
    assert sorted(g.predecessors(scan.label)) == sorted(x.label for x in scan.inputs)
    assert g.number_of_nodes() == len(graph.nodes)


@pytest.mark.parametrize("name", ["han", "seq2seq-bahdanau"])
def test_the_summary_command_on_a_model_with_a_recurrent_encoder(name, capsys):
    assert main(["summary", name, "--tiny", "--dim", "B=2"]) == 0
    text = capsys.readouterr().out
    cell = next(line.split() for line in text.splitlines() if line.startswith("  cell "))     # the encoder's
    hidden = next(line.split() for line in text.splitlines() if line.startswith("    hidden "))
    steps = "4" if name == "han" else "6"                                     # words of a sentence, source tokens
    assert cell[1:3] == ["GRUCell", steps] and hidden[1:3] == ["Linear", steps] and hidden[-2] != "0"
    assert "scan(" not in text                      # no "tied" row for the parameters a scan reads
