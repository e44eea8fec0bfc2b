"""Views folded into the steps that read them (core/folding.py): the fast loop makes no call of its own for them."""
import numpy as np

import attngraph as ag
from attngraph.core.folding import folded
from attngraph.core.interpreter import Interpreter
from tests.core.test_together import feeds, gradient


def node_by_node(step, **inputs):
    """``step``'s outputs with each node run as a step of its own (through an interpreter: nothing folded)."""
    step.interpreter = Interpreter("cpu")
    try:
        return step(**inputs)
    finally:
        step.interpreter = None


def fast_plan(step):
    """The steps ``step``'s fast loop runs (its shapes are all known: no bindings). Made again rather than read from
    the plan cache, which is emptied once the helpers compiling kernels ahead (a cold cache) have finished."""
    _, fast = step._plan({})
    return fast


def test_a_reshape_and_a_slice_it_feeds_a_product_fold_into_the_product(rng):
    x, w = rng.standard_normal((6, 4, 9)).astype(np.float32), rng.standard_normal((5, 3)).astype(np.float32)
    step = ag.trace(lambda x, w: ag.reshape(x, (24, 9))[:, 2:7] @ w, x=x, w=w).compile()
    assert [node.op for node in step._nodes] == ["reshape", "getitem", "matmul"]
    assert step.kernel_calls == 1 and "1 kernel calls" in repr(step)
    out = step(x=x, w=w)
    assert len(fast_plan(step)) == 1
    assert np.array_equal(out, np.ascontiguousarray(x.reshape(24, 9)[:, 2:7]) @ w)
    assert np.array_equal(out, node_by_node(step, x=x, w=w))


def test_views_that_are_returned_copied_or_that_might_copy_stay_steps(rng):
    x, w = rng.standard_normal((6, 12)).astype(np.float32), rng.standard_normal((4, 5)).astype(np.float32)
    returned = ag.trace(lambda x: ag.tanh(x)[:, 1:5], x=x).compile()
    copied = ag.trace(lambda x: ag.softmax(ag.tanh(x)[:, 1:5]), x=x).compile()        # a softmax reads rows in order
    reshaped_slice = ag.trace(lambda x, w: ag.reshape(x[:, 2:10], (12, 4)) @ w, x=x, w=w).compile()
    assert returned.kernel_calls == len(returned._steps) == 2
    assert copied.kernel_calls == len(copied._steps) == 3
    assert [node.op for node in reshaped_slice._nodes] == ["getitem", "reshape", "matmul"]
    assert reshaped_slice.kernel_calls == 2                  # the slice folds into the reshape, which copies it
    assert np.array_equal(reshaped_slice(x=x, w=w), x[:, 2:10].reshape(12, 4) @ w)


def test_a_chain_of_views_composes_and_what_it_views_lives_until_its_last_reader():
    """Slot 0 is viewed by 1, which 2 views; 3 reads 0 directly and last, but 4 reads it later through 2."""
    def view(x):
        return x[1:]
    plan = [(view, (0,), 1, ()), (view, (1,), 2, ()), (np.sum, (0,), 3, (0,)), (lambda v, s: v * s, (2, 3), 4, (2, 3))]
    fast = folded(plan, views={1, 2}, keep={4})
    assert [(inputs, output, frees) for _, inputs, output, frees in fast] == [((0,), 3, ()), ((0, 3), 4, (0, 3))]
    env = [np.arange(4.0), None, None, None, None]
    for call, inputs, output, frees in fast:
        env[output] = call(*[env[i] for i in inputs])
        for i in frees:
            env[i] = None
    assert np.array_equal(env[4], np.arange(2.0, 4.0) * 6) and env[0] is None


def test_a_gradient_with_paired_loops_runs_folded_bit_for_bit_and_frees_what_it_reads_last():
    step = gradient(bidirectional=True).compile()
    inputs = feeds()
    assert step.kernel_calls < len(step._steps) - 10
    fast_outputs, slow_outputs = step(**inputs), node_by_node(step, **inputs)
    assert all(np.array_equal(a, b) for a, b in zip(fast_outputs, slow_outputs))
    freed, written = set(), set()
    for _, inputs_, output, frees in fast_plan(step):
        assert not freed.intersection(inputs_), "a step reads a slot freed before it"
        written.update(range(output.start, output.stop) if isinstance(output, slice) else [output])
        freed.update(frees)
    kept = set(step._outputs)
    assert written - kept <= freed, "every intermediate is freed"
