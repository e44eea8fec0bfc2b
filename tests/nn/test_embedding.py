"""nn.Embedding's padding_idx as torch.nn.Embedding's: the row starts at zero, gets no gradient and stays zero
through training (Adam on every device), a negative one counts from the end, one outside the table is refused."""
import numpy as np
import pytest

import attngraph as ag
from attngraph.nn import Embedding
from attngraph.train.optim import Adam


def test_the_padding_row_starts_at_zero_and_training_leaves_it_there(device):
    embed = Embedding(5, 3, padding_idx=-1, dtype="float64", rng=np.random.default_rng(0))
    assert embed.padding_idx == 4 and repr(embed) == "Embedding(5, 3, padding_idx=4)"
    np.testing.assert_array_equal(embed.weight.numpy()[4], 0)
    assert np.abs(embed.weight.numpy()[:4]).min() > 0
    tokens = np.array([[4, 1, 4], [2, 4, 0]])
    target = np.random.default_rng(1).standard_normal((2, 3, 3))
    step = ag.trace(lambda tokens: ag.sum((embed(tokens) - target) ** 2), tokens=tokens).grad().compile(device.name)
    optimizer, before = Adam(embed.parameters(), 0.1), embed.weight.numpy().copy()
    losses = []
    for _ in range(3):
        loss, grad = step(tokens=tokens)
        np.testing.assert_array_equal(grad[4], 0)
        optimizer.step([grad])
        losses.append(float(loss))
    weight = embed.weight.numpy()
    assert losses[-1] < losses[0]
    np.testing.assert_array_equal(weight[4], 0)
    np.testing.assert_array_equal(weight[3], before[3])              # not looked up: Adam leaves it
    assert (weight[:3] != before[:3]).all()


def test_without_padding_idx_every_row_is_drawn_and_trained():
    embed = Embedding(3, 2, rng=np.random.default_rng(0))
    assert embed.padding_idx is None and repr(embed) == "Embedding(3, 2)" and np.abs(embed.weight.numpy()).min() > 0
    _, grad = ag.trace(lambda t: ag.sum(embed(t)), t=np.array([0, 1, 2])).grad().compile()(t=np.array([0, 1, 2]))
    np.testing.assert_array_equal(grad, np.ones((3, 2)))


@pytest.mark.parametrize("bad, error, message", [
    (5, ValueError, r"padding_idx must be an int in \[-5, 4\], got 5"),
    (-6, ValueError, r"padding_idx must be an int in \[-5, 4\], got -6"),
    (1.0, TypeError, r"padding_idx must be an int, got 1\.0"),
    (True, TypeError, r"padding_idx must be an int, got True")])
def test_a_padding_idx_outside_the_table_is_refused_naming_it(bad, error, message):
    with pytest.raises(error, match=message):
        Embedding(5, 3, padding_idx=bad)
