"""The first training step in a fresh process, timed from before ``import attngraph``: tracing,
differentiation, compilation and numba's kernel compilation (or cache loading) included. Prints one JSON
object. Run it with an empty ``NUMBA_CACHE_DIR`` for a cold start, then again for a warm one.

    python -m benchmarks.first_step [gpt]   the gpt_step case (run by the ``compile`` case):
                                            {"seconds", "import_s", "trace_s", "step_s"}
    python -m benchmarks.first_step copy    the copy demo (``attngraph demo copy``, its defaults, one thread):
                                            {"seconds", "import_s", "setup_s", "step_s"}; setup is the demo's
                                            data and model, and its first step traces and compiles the graph
"""
import contextlib
import io
import json
import sys
import tempfile
import time


def gpt() -> dict:
    start = time.perf_counter()
    import numpy as np

    import attngraph as ag
    from attngraph.models.gpt import GPT
    from attngraph.train.optim import AdamW

    imported = time.perf_counter()
    rng = np.random.default_rng(0)
    tokens, targets = (rng.integers(0, 65, (32, 64)) for _ in range(2))
    model = GPT(65, 128, 4, 2, 512, 64, dropout=0.0, rng=rng)
    graph = ag.trace(lambda tokens, targets: ag.cross_entropy(model(tokens), targets), tokens=tokens,
                     targets=targets)
    params = [node for node in graph.parameters.values() if not node.stop_gradient]
    step = graph.grad(wrt=params).compile()
    traced = time.perf_counter()
    _, *grads = step(tokens=tokens, targets=targets)
    AdamW([(node.name, node.value) for node in params]).step(grads)
    done = time.perf_counter()
    return {"seconds": done - start, "import_s": imported - start, "trace_s": traced - imported,
            "step_s": done - traced}


def copy() -> dict:
    """The demo trains one step (``--steps 1``); ``Run.train`` is timed by wrapping it."""
    start = time.perf_counter()
    from attngraph.demos import common, copy

    imported = time.perf_counter()
    train, marks = common.Run.train, {}

    def timed_train(run, *args, **options):
        marks["setup"] = time.perf_counter()
        trainer = train(run, *args, **options)
        marks["step"] = time.perf_counter()
        return trainer

    common.Run.train = timed_train
    with tempfile.TemporaryDirectory() as out, contextlib.redirect_stdout(io.StringIO()):
        copy.main(["--steps", "1", "--heldout", "1", "--out", out])
    return {"seconds": marks["step"] - start, "import_s": imported - start, "setup_s": marks["setup"] - imported,
            "step_s": marks["step"] - marks["setup"]}


if __name__ == "__main__":
    print(json.dumps({"gpt": gpt, "copy": copy}[(sys.argv[1:] or ["gpt"])[0]]()))
