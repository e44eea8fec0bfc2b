"""FLOP counts against hand-computed values; a multiply-add counts 2."""
import pytest

import attngraph as ag
from attngraph.inspect import binding, format_count, total_flops


def test_matmul_counts_two_flops_per_multiply_add():
    graph = ag.trace(lambda a, b: a @ b, a=ag.Input(("B", "T", 4)), b=ag.Input((4, 5)))
    assert total_flops(graph, B=2, T=3) == 2 * (2 * 3 * 5) * 4         # 2 · outputs · inner size
    assert total_flops(graph) == 2 * (1 * 1 * 5) * 4                    # unbound dimensions count as 1


def test_softmax_counts_five_flops_per_element():
    graph = ag.trace(lambda x: ag.softmax(x), x=ag.Input((2, 3, 4)))
    assert total_flops(graph) == 5 * 24                                 # max, subtract, exp, sum, divide


def test_scaled_dot_product_attention():
    q = ag.Input((1, 2, 3, 4))                                          # (B, heads, T, d)
    graph = ag.trace(lambda q, k, v: ag.scaled_dot_product_attention(q, k, v), q=q, k=q, v=q)
    scores, scale, softmax, mix = 2 * 18 * 4, 18, 5 * 18, 2 * 24 * 3    # 18 = 1·2·3·3 scores, 24 outputs
    assert total_flops(graph) == scores + scale + softmax + mix == 396


def test_multi_head_attention_adds_four_projections():
    graph = ag.trace(ag.attention.MultiHeadAttention(8, 2), query=ag.Input((1, 3, 8)), key=ag.Input((1, 3, 8)),
                     value=ag.Input((1, 3, 8)))
    projections = 4 * (2 * 3 * 8 * 8 + 3 * 8)                          # x W and + b for q, k, v and the output
    assert total_flops(graph) == projections + 396 == 2028


def test_binding_and_formatting():
    graph = ag.trace(lambda x: x * 2.0, x=ag.Input(("B", "T")))
    assert binding(graph, T=7) == {"B": 1, "T": 7}
    with pytest.raises(ag.AttnGraphError, match="no dimension"):
        binding(graph, D=3)
    assert [format_count(n, "FLOPs") for n in (0, 999, 1234, 2.5e6, 3e9)] == \
        ["0 FLOPs", "999 FLOPs", "1.23 kFLOPs", "2.5 MFLOPs", "3 GFLOPs"]
