"""Every registered model, in its tiny configuration, exported to ONNX and run by onnxruntime: the same outputs as
attngraph within 1e-5 at two batch sizes and, where the inputs have symbolic lengths, two lengths: one file
serves them all. The graph as traced, and as the compiler optimizes it (flash attention, fused elementwise
kernels, transposes absorbed into matmuls)."""
import numpy as np
import pytest

import attngraph as ag
from attngraph import models
from attngraph.core.passes import optimize

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")


def shortened(graph, batch: dict, by: int) -> dict:
    """The batch with every symbolic axis after the first (the lengths) cut ``by`` shorter."""
    feeds = {}
    for name, x in batch.items():
        shape = graph.inputs[name].shape if name in graph.inputs else ()
        feeds[name] = x[tuple(slice(0, x.shape[a] - by) if isinstance(d, str) and a else slice(None)
                              for a, d in enumerate(shape))]
    return feeds


@pytest.mark.parametrize("optimized", [False, True], ids=["traced", "optimized"])
@pytest.mark.parametrize("name", models.names())
def test_every_registered_model_runs_in_onnxruntime_as_in_attngraph(name, optimized, matches):
    spec = models.spec(name)
    model = models.get(name, tiny=True).eval()
    graph = ag.trace(model, **spec.inputs(model))
    exported = optimize(graph) if optimized else graph
    if optimized:
        assert "fused" in {n.op for n in exported.nodes}
    feeds = [spec.batch(model, np.random.default_rng(0), 2), shortened(graph, spec.batch(model, np.random.default_rng(1), 3), 3)]
    assert any(a.shape != b.shape for a, b in zip(feeds[0].values(), feeds[1].values()))
    matches(exported, *feeds)


@pytest.mark.parametrize("name", ["gpt", "bert"])
def test_a_loss_exports_with_its_cross_entropy(name, matches):
    """GPT's loss averages every target; BERT's ignores the unmasked positions (ignore_index)."""
    spec = models.spec(name)
    model = models.get(name, tiny=True).eval()
    batch = spec.batch(model, np.random.default_rng(0), 3)
    loss = ag.trace(lambda **b: spec.loss(model, **b), **batch)
    assert "cross_entropy" in {n.op for n in loss.nodes}
    matches(loss, batch)
