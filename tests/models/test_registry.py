"""Every registered model, in its tiny configuration: traces symbolically, runs forward and backward, and
learns one small synthetic batch."""
import numpy as np
import pytest

import attngraph as ag
from attngraph import models
from attngraph.train import Adam

STEPS, LEARNING_RATE = 40, 2e-2


def test_every_model_of_the_zoo_is_registered():
    assert models.names() == ["bert", "elmo", "gpt", "han", "lstmn", "memn2n", "ntm", "pointer", "seq2seq-bahdanau",
                              "seq2seq-luong", "show-attend-tell", "show-attend-tell-hard", "snail", "structured",
                              "transformer", "vit"]


@pytest.mark.parametrize("name", models.names())
def test_model_runs_forward_and_backward_and_learns_a_batch(name):
    spec = models.spec(name)
    model = models.get(name, tiny=True)
    batch = spec.batch(model, np.random.default_rng(0), 4)

    inputs = spec.inputs(model)
    forward = ag.trace(model, **inputs)
    assert set(forward.parameters) == {path for path, _ in model.named_parameters()}
    outputs = forward.compile()(**{key: batch[key] for key in inputs})
    for output in outputs if isinstance(outputs, tuple) else [outputs]:
        assert np.isfinite(output).all()

    loss = ag.trace(lambda **b: spec.loss(model, **b), **batch)
    step = loss.grad().compile()
    optimizer = Adam([node.value for node in loss.parameters.values()], lr=LEARNING_RATE)
    losses = []
    for _ in range(STEPS):
        value, *grads = step(**batch)
        assert all(np.isfinite(g).all() for g in grads)
        optimizer.step(grads)
        losses.append(float(value))
    assert losses[-1] < 0.5 * losses[0], losses


def test_get_builds_the_default_or_tiny_configuration_with_overrides():
    assert models.get("gpt").num_parameters() > models.get("gpt", tiny=True).num_parameters()
    assert len(models.get("gpt", tiny=True, layers=3).transformer.layers) == 3
    with pytest.raises(ag.AttnGraphError, match="no setting"):
        models.get("gpt", depth=3)
