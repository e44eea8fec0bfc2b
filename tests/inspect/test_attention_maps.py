"""attention_maps(): every node named "attention", read back by scope after a run."""
import numpy as np

import attngraph as ag
from attngraph.attention import Attention, DotScore
from attngraph.inspect import attention_maps
from tests.inspect.transformer import forward_graph


def test_maps_of_a_two_layer_transformer():
    tokens = np.random.default_rng(0).integers(0, 11, (2, 5))
    maps = attention_maps(forward_graph(), tokens=tokens)
    assert list(maps) == ["layers.0.attn", "layers.1.attn"]
    for weights in maps.values():
        assert weights.shape == (2, 2, 5, 5)                     # (B, heads, Tq, Tk)
        np.testing.assert_allclose(weights.sum(-1), 1, rtol=1e-5)


def test_a_module_called_at_every_step_gives_a_list_in_call_order():
    attend = Attention(DotScore())

    def decode(memory, queries):
        return ag.concat([attend(queries[:, t], memory)[0] for t in range(3)], axis=-1)

    rng = np.random.default_rng(1)
    memory, queries = rng.standard_normal((1, 4, 2)).astype(np.float32), rng.standard_normal((1, 3, 2)).astype(np.float32)
    maps = attention_maps(ag.trace(decode, memory=memory, queries=queries), memory=memory, queries=queries)
    steps = maps[""]                                # the module called at top level is the root: scope ""
    assert isinstance(steps, list) and len(steps) == 3
    for t, weights in enumerate(steps):              # (B, 1, Tk): the softmax runs before the query axis is dropped
        scores = memory[0] @ queries[0, t]
        np.testing.assert_allclose(weights[0, 0], np.exp(scores) / np.exp(scores).sum(), rtol=1e-5)


def test_a_graph_without_attention():
    assert attention_maps(ag.trace(lambda x: x * 2.0, x=np.ones(2, np.float32)), x=np.ones(2, np.float32)) == {}


def test_by_example_reads_every_map_as_examples_heads_queries_keys():
    from attngraph.inspect.attention import by_example
    rng = np.random.default_rng(2)
    heads, single = rng.random((2, 3, 4, 5)), rng.random((2, 4, 5))
    np.testing.assert_array_equal(by_example(heads), heads)
    np.testing.assert_array_equal(by_example(single)[:, 0], single)
    assert by_example(single[0]).shape == (1, 1, 4, 5)
    steps = [rng.random((2, 3)), rng.random((2, 4))]             # a decoder's steps (B, Tk), keys growing
    stacked = by_example(steps)
    assert stacked.shape == (2, 1, 2, 4)
    np.testing.assert_array_equal(stacked[1, 0, 0], [*steps[0][1], 0])
    np.testing.assert_array_equal(stacked[:, 0, 1], steps[1])
