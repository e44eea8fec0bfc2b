"""The reprs a user meets in a REPL are one short line (a node's dataclass repr printed its whole ancestry)."""
import attngraph as ag
from attngraph.core import functional as F
from tests.inspect.transformer import Encoder, inputs


def test_a_node_is_one_line_naming_its_inputs_by_id():
    model = Encoder(layers=2)
    graph = ag.trace(lambda tokens: F.name(model(tokens), "logits"), tokens=ag.Input(("B", "T"), "int64"))
    logits = graph.outputs[0].inputs[0]
    assert repr(logits) == f"Node({logits.label} add({logits.inputs[0].label}, {logits.inputs[1].label}) (B, T, 11) " \
                           "float32 'logits' in scope 'head')"
    assert repr(graph.inputs["tokens"]) == "Node(n0 input (B, T) int64 'tokens')"
    assert max(len(repr(n)) for n in graph.nodes) < 120


def test_a_backward_node_names_the_node_it_differentiates():
    graph = ag.trace(lambda x: ag.sum(ag.tanh(x)), x=ag.Input((3,), "float64")).grad(wrt=["x"])
    tanh = next(n for n in graph.nodes if n.op == "tanh")
    grad = graph.output("grad:x").inputs[0]
    assert repr(grad) == f"Node({grad.label} mul({grad.inputs[0].label}, {grad.inputs[1].label}) (3,) float64 " \
                         f"gradient of {tanh.label})"


def test_graph_parameter_and_module_reprs_stay_short():
    model = Encoder(layers=2)
    graph = ag.trace(model, **inputs(model))
    assert repr(graph) == f"Graph({len(graph.nodes)} nodes, {sum(n.kind == 'call' for n in graph.nodes)} op calls, " \
                          "inputs ['tokens'], outputs ['output'])"
    assert repr(model.head.weight) == "Parameter(weight[16, 11], float32, trainable=True)"
    modules = [m for _, m in model.named_modules()]
    lines = repr(model).splitlines()        # a line a module, and a closing one for each module holding others
    assert len(lines) == len(modules) + sum(bool(m._modules) for m in modules) and max(map(len, lines)) < 80
    assert lines[:2] == ["Encoder(", "  (embed): Embedding(11, 16)"]
