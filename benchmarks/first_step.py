"""The first training step of the gpt_step case, timed from before ``import attngraph``: tracing,
differentiation, compilation and numba's kernel compilation (or cache loading) included. Prints one JSON
object: {"seconds", "import_s", "trace_s", "step_s"}. Run by the ``compile`` case in a fresh process."""
import json
import time


def main() -> None:
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
    print(json.dumps({"seconds": done - start, "import_s": imported - start, "trace_s": traced - imported,
                      "step_s": done - traced}))


if __name__ == "__main__":
    main()
