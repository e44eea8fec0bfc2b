"""summary(): the module tree with shapes, parameters, FLOPs and memory, as data and as text."""
import numpy as np
import pytest

import attngraph as ag
from attngraph.inspect import summary, total_flops
from tests.inspect.transformer import Encoder, inputs, loss_graph


def test_rows_follow_the_module_tree_with_totals():
    model = Encoder()
    graph = ag.trace(model, **inputs(model))
    s = summary(graph, model=model, T=5)
    modules = [r["module"] for r in s.rows]
    assert modules[:4] == ["embed", "layers", "layers.0", "layers.0.attn"] and modules[-1] == "head"
    assert modules.index("layers.0.norm2") < modules.index("layers.1")
    row = {r["module"]: r for r in s.rows}
    assert row["layers.0.attn.w_q"] == dict(module="layers.0.attn.w_q", type="Linear", depth=4, calls=1,
                                            input="B×5×16", output="B×5×16", parameters=16 * 16 + 16,
                                            percent=row["layers.0.attn.w_q"]["percent"], flops=2 * 5 * 16 * 16 + 5 * 16, trainable=272)
    assert s.parameters == s.trainable == model.num_parameters()
    assert row["layers"]["parameters"] == row["layers.0"]["parameters"] + row["layers.1"]["parameters"]
    assert abs(sum(r["percent"] for r in s.rows if r["depth"] == 1) - 100) < 1e-9
    assert s.flops == total_flops(graph, T=5) and s.backward_flops == 0
    assert s.parameter_bytes == 4 * s.parameters
    assert s.bindings == {"B": 1, "T": 5} and s.defaulted == ["B"] and s.inputs == {"tokens": "B×T int64"}
    assert [row[m]["type"] for m in ("embed", "layers", "layers.0", "layers.0.attn", "layers.0.mlp.1")] == [
        "Embedding", "ModuleList", "Block", "MultiHeadAttention", "Activation"]
    assert row["embed"]["input"] == "B×5" and row["head"]["output"] == "B×5×11"      # T given: bound
    assert {r["type"] for r in summary(graph).rows} == {""}         # without the model, no classes


def test_text_table_and_depth():
    model = Encoder()
    text = str(summary(ag.trace(model, **inputs(model)), depth=1, model=model))
    lines = text.splitlines()
    assert lines[0].split() == ["module", "type", "calls", "input", "output", "parameters", "%", "params", "FLOPs",
                                "trainable"]
    assert lines[2].split() == ["embed", "Embedding", "1", "B×T", "B×T×16", "176", "3.7", "0", "176"]
    assert "layers.0" not in text and "4,811" in text
    assert lines[-5:-3] == ["inputs       tokens B×T int64", "sizes        B, T not given: counted as 1"]
    assert "per forward pass at B=1, T=1 (a multiply-add is 2)" in text
    footer = str(summary(ag.trace(model, **inputs(model)), depth=1, T=7)).splitlines()
    assert footer[-4] == "sizes        T=7; B not given: counted as 1"
    assert str(summary(ag.trace(model, **inputs(model)), depth=1, B=2, T=7)).splitlines()[-4] == "sizes        B=2, T=7"


def test_module_summary_traces_concrete_inputs():
    model = Encoder()
    s = model.summary(tokens=np.zeros((2, 7), np.int64))
    assert s.bindings == {} and s.rows[0]["output"] == "2×7×16" and s.rows[0]["type"] == "Embedding"
    assert "sizes" not in str(s) and "inputs       tokens 2×7 int64" in str(s)


def test_calls_frozen_parameters_and_the_backward_pass():
    model = Encoder(layers=1)
    model.embed.weight.trainable = False
    s = summary(loss_graph(model).grad(), B=2, T=3)
    row = {r["module"]: r for r in s.rows}
    assert row["embed"]["trainable"] == 0 and s.trainable == s.parameters - 11 * 16
    assert s.backward_flops > s.flops > 0

    class Twice(ag.Module):
        def __init__(self):
            super().__init__()
            self.cell = ag.nn.Linear(4, 4)

        def forward(self, x):
            return self.cell(ag.tanh(self.cell(x)))

    row = summary(ag.trace(Twice(), x=ag.Input((2, 4)))).rows[0]
    assert row["module"] == "cell" and row["calls"] == 2 and row["flops"] == 2 * (2 * 2 * 4 * 4 + 2 * 4)
    assert row["input"] == row["output"] == "2×4"           # the weight and bias are not inputs


def registered(name: str, **sizes):
    from attngraph import models
    model = models.get(name, tiny=True)
    return summary(ag.trace(model, **models.spec(name).inputs(model)), model=model, **sizes)


def test_sizes_given_bind_the_shapes_and_rng_seed_is_no_input():
    s = registered("gpt", B=2, T=8)             # the tiny GPT has dropout 0; the default one has an rng_seed input
    from attngraph import models
    model = models.get("gpt", dropout=0.1)
    with_dropout = summary(ag.trace(model, **models.spec("gpt").inputs(model)), B=2)
    assert s.inputs == with_dropout.inputs == {"tokens": "B×T int64"}        # the names that the sizes bind
    assert all("scalar" not in r["input"] for r in with_dropout.rows)
    assert {r["module"]: r["output"] for r in s.rows}["transformer"] == "2×8×16"


def test_a_tied_output_head_has_a_row():
    s = registered("gpt", B=2, T=8)
    head = s.rows[-1]
    assert head["label"] == "matmul(token_embed.weight)" and head["depth"] == 1 and head["parameters"] == 0
    assert head["input"] == "2×8×16, 16×12" and head["output"] == "2×8×12" and head["flops"] == 2 * 2 * 8 * 16 * 12
    assert s.flops >= sum(r["flops"] for r in s.rows if r["depth"] == 1) - 1
    assert "matmul(token_embed.weight)  tied" in str(s)


def test_a_recurrent_cell_counts_one_call_per_step():
    """A cell unrolled over 4 steps, its input projected once for all of them: 4 calls, not 5 runs."""
    from tests.inspect.test_calls import Unrolled
    model = Unrolled()
    rows = {r["module"]: r for r in summary(ag.trace(model, x=ag.Input(("B", 4, 2))), model=model).rows}
    assert [rows[m]["calls"] for m in ("cell", "cell.input", "cell.hidden")] == [4, 1, 4]


@pytest.mark.parametrize("size", [-4, 0, 2.5, True])
def test_sizes_must_be_positive_integers(size):
    model = Encoder()
    with pytest.raises(ag.BindingError, match="must be a positive integer"):
        summary(ag.trace(model, **inputs(model)), B=size)
