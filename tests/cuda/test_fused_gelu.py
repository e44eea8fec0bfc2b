"""The fusion pass moves a Linear layer's bias into GELU; the CUDA kernels take that bias too."""
import numpy as np

import attngraph as ag


def test_linear_then_gelu_after_fusion_matches_the_cpu():
    layer = ag.nn.Linear(3, 4, rng=np.random.default_rng(0))
    x = np.random.default_rng(1).standard_normal((2, 3)).astype(np.float32)
    graph = ag.trace(lambda x: ag.sum(ag.gelu(layer(x)) * ag.gelu(layer(x), approximate="none")), x=x).grad()
    assert any(n.op == "gelu" and len(n.inputs) == 2 for n in graph.compile().graph.nodes), "bias not fused"
    cpu, cuda = graph.compile("cpu")(x=x), graph.compile("cuda")(x=x)
    for a, b in zip(cpu, cuda):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)
