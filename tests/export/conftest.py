"""Fixtures that run exported graphs in onnxruntime. The test modules skip when the onnx extra (onnx, onnxruntime)
is not installed."""
import numpy as np
import pytest


@pytest.fixture
def run_onnx():
    """``run_onnx(graph, feeds, **sizes)``: ``graph`` exported, checked by onnx (types and shapes included) and run
    by onnxruntime on the feeds it declares as inputs; its outputs."""
    import onnx
    import onnxruntime as ort

    from attngraph.export import to_onnx

    def run(graph, feeds: dict, **sizes) -> list[np.ndarray]:
        model = to_onnx(graph, **sizes)
        onnx.checker.check_model(model, full_check=True)
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        return session.run(None, {i.name: feeds[i.name] for i in session.get_inputs()})
    return run


@pytest.fixture
def matches(run_onnx):
    """``matches(graph, *feed_sets)``: for each set of feeds, onnxruntime's outputs equal attngraph's within 1e-5
    (same shapes and dtypes)."""
    def check(graph, *feed_sets):
        run = graph.compile()
        for feeds in feed_sets:
            want = run(**{name: feeds[name] for name in graph.inputs if name != "rng_seed"})
            want = want if isinstance(want, tuple) else (want,)
            got = run_onnx(graph, feeds)
            assert len(got) == len(want)
            for g, w in zip(got, want):
                assert g.shape == w.shape and g.dtype == w.dtype
                np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
    return check
