"""The graph IR, tracing, modules and the executor."""
import inspect

import networkx as nx
import numpy as np
import pytest

import attngraph as ag


class Block(ag.Module):
    def __init__(self):
        super().__init__()
        self.proj = ag.nn.Linear(8, 8)
        self.norm = ag.nn.LayerNorm(8)

    def forward(self, x):
        return self.norm(x + ag.relu(self.proj(x)))


class Net(ag.Module):
    def __init__(self):
        super().__init__()
        self.layers = ag.nn.ModuleList([Block(), Block()])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


def test_symbolic_dimensions_serve_every_batch_size_and_length(rng):
    net = Net()
    graph = ag.trace(net, x=ag.Input(("B", "T", 8)))
    assert graph.output("output").shape == ("B", "T", 8)
    run = graph.compile()
    for shape in [(1, 1, 8), (3, 5, 8), (2, 7, 8)]:
        assert run(x=rng.standard_normal(shape).astype(np.float32)).shape == shape


def test_scopes_parameter_names_and_source_lines():
    graph = ag.trace(Net(), x=ag.Input(("B", 8)))
    assert list(graph.parameters) == ["layers.0.proj.weight", "layers.0.proj.bias", "layers.0.norm.weight",
                                      "layers.0.norm.bias", "layers.1.proj.weight", "layers.1.proj.bias",
                                      "layers.1.norm.weight", "layers.1.norm.bias"]
    relu = next(n for n in graph.nodes if n.op == "relu")
    assert relu.scope == "layers.0"
    relu_line = inspect.getsourcelines(Block.forward)[1] + 1
    assert relu.source.endswith(f"test_graph.py:{relu_line}")
    matmul = next(n for n in graph.nodes if n.op == "matmul")
    assert matmul.scope == "layers.0.proj" and "layers.py" in matmul.source


def test_to_networkx_carries_node_attributes():
    graph = ag.trace(Net(), x=ag.Input(("B", 8)))
    g = graph.to_networkx()
    assert isinstance(g, nx.DiGraph) and g.number_of_nodes() == len(graph.nodes)
    assert nx.is_directed_acyclic_graph(g)
    weight = next(v for v, d in g.nodes(data=True) if d["name"] == "layers.1.proj.weight")
    assert g.nodes[weight]["parameter_size"] == 64 and g.nodes[weight]["kind"] == "parameter"
    out = next(v for v, d in g.nodes(data=True) if d["op"] == "output")
    assert g.nodes[out]["shape"] == ("B", 8)


def test_flattening_symbolic_shapes_gives_products(rng):
    def f(x):
        flat = ag.reshape(x, (-1, 4))
        assert flat.shape == ("B*T", 4)
        return ag.reshape(flat * 2, ("B", "T", 4))

    graph = ag.trace(f, x=ag.Input(("B", "T", 4)))
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    np.testing.assert_allclose(graph.compile()(x=x), 2 * x)


def test_state_dict_round_trips_and_mismatches_are_listed(rng):
    a, b = Net(), Net()
    b.load_state_dict(a.state_dict())
    x = rng.standard_normal((2, 8)).astype(np.float32)
    np.testing.assert_array_equal(ag.trace(a, x=x).compile()(x=x), ag.trace(b, x=x).compile()(x=x))
    state = a.state_dict()
    state["layers.0.proj.weight"] = np.zeros((8, 9), np.float32)
    del state["layers.1.norm.bias"]
    state["extra"] = np.zeros(1, np.float32)
    before = b.state_dict()
    with pytest.raises(ag.CheckpointError) as err:
        b.load_state_dict(state)
    for text in ["layers.0.proj.weight: expected (8, 8)", "missing: layers.1.norm.bias", "unexpected: extra"]:
        assert text in str(err.value)
    for name, value in b.state_dict().items():
        np.testing.assert_array_equal(value, before[name])


def test_executor_frees_intermediates_after_their_last_use():
    def chain(x):
        for _ in range(50):
            x = ag.tanh(x)
        return x

    run = ag.trace(chain, x=ag.Input((4,))).compile()
    live, peak = set(), 0
    for step in run._steps:
        live.add(step.output)
        peak = max(peak, len(live))
        live -= set(step.frees)
    assert peak <= 2


def test_weight_gradients_are_computed_as_the_backward_pass_reaches_their_layer(rng):
    weights = [ag.Parameter(rng.standard_normal((64, 64)) / 8, name=f"w{i}") for i in range(4)]

    def loss(x):
        for w in weights:
            x = ag.tanh(x @ w)
        return ag.sum(x * x)

    graph = ag.trace(loss, x=ag.Input((32, 64), "float64"))
    run = graph.grad(list(graph.parameters.values())).compile()
    position = {node: i for i, node in enumerate(run._nodes)}
    gradients = [position[node.inputs[0]] for node in run.graph.outputs[1:]]      # of w0, w1, w2, w3
    assert gradients == sorted(gradients, reverse=True)           # w3's first: the backward pass starts there
    forward_end = max(position[n] for n in run._nodes if n.grad_of is None)
    assert gradients[-1] < forward_end + 4 * 3                     # w3's right after the first backward steps


def test_dropout_is_identity_in_eval_mode():
    drop = ag.nn.Dropout(0.5)
    x = np.ones((4, 4), np.float32)
    assert any(n.op == "dropout" for n in ag.trace(drop, x=x).nodes)
    drop.eval()
    graph = ag.trace(drop, x=x)
    assert not any(n.op == "dropout" for n in graph.nodes)
    np.testing.assert_array_equal(graph.compile()(x=x), x)


def test_nested_outputs_are_flattened_with_names():
    graph = ag.trace(lambda x: (x, (x * 2, x * 3), {"named": x * 4}), x=ag.Input((2,)))
    assert graph.output_names == ["output0", "output1_0", "output1_1", "named"]
    outputs = graph.compile()(x=np.ones(2, np.float32))
    np.testing.assert_array_equal(outputs[2], [3, 3])


def test_numpy_arrays_on_the_left_of_operators_build_nodes():
    lin = ag.nn.Linear(3, 2)
    graph = ag.trace(lambda x: np.ones((2, 3), np.float32) @ lin.weight + np.ones(2, np.float32) * x,
                     x=np.zeros(2, np.float32))
    np.testing.assert_allclose(graph.compile()(x=np.ones(2, np.float32)), np.ones((2, 3)) @ lin.weight.data + 1,
                               rtol=1e-6)


def test_tracing_a_bound_method_names_parameters_by_their_path():
    class Model(ag.Module):
        def __init__(self):
            super().__init__()
            self.src_embed = ag.nn.Embedding(5, 3)

        def encode(self, tokens):
            return self.src_embed(tokens)

    graph = ag.trace(Model().encode, tokens=ag.Input((2,), "int64"))
    assert list(graph.parameters) == ["src_embed.weight"]


def test_with_outputs_reads_back_a_node_that_feeds_no_output(rng):
    x = rng.standard_normal((2, 3)).astype(np.float32)
    kept = {}

    def f(x):
        kept["unused"] = ag.exp(x).node
        return x * 2.0

    graph = ag.trace(f, x=x)
    doubled, unused = graph.with_outputs({"unused": kept["unused"]}).compile()(x=x)
    np.testing.assert_allclose(doubled, 2 * x)
    np.testing.assert_allclose(unused, np.exp(x), rtol=1e-6)
    other = ag.trace(lambda x: x + 1.0, x=x)
    with pytest.raises(KeyError, match="not a node of this graph"):
        graph.with_outputs({"foreign": other.outputs[0].inputs[0]})
    assert len(graph.compile()._steps) == 1                 # the unused exp is not run by the graph itself
