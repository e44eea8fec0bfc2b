"""``ag.scan`` (core/loops.py; the ``scan`` primitive, core/prims/recurrence.py): its values are the unrolled Python
loop's (bit for bit for the GRU and LSTM cells), its gradients central differences' in float64 (second order too),
bad inputs and steps are refused while tracing with errors naming what is wrong, debug mode names the body's node
and the time step of a NaN, the CUDA backend (numba's simulator without a GPU) gives the CPU's numbers, and the
Trainer trains a GRU encoder through it."""
import numpy as np
import pytest

import attngraph as ag
from attngraph.inspect import gradcheck, gradcheck_parameters
from attngraph.nn import GRUCell, LSTMCell
from attngraph.train import Adam, Trainer

B, T, IN, H, S = 2, 4, 3, 4, 3


def compiled(fn, **inputs):
    """``fn`` traced on ``inputs`` (arrays or ``ag.Input`` specs) and compiled for the CPU."""
    return ag.trace(fn, **inputs).compile()


def bodies(graph) -> list:
    return [node.attrs["body"] for node in graph.nodes if node.op == "scan"]


def invariant_work(body) -> list:
    """The body's calls that depend on neither the carry nor a time step (work that belongs before the loop)."""
    varying = {body.graph.inputs[name] for name in body.names[:1 + body.sequences]}
    for node in body.graph.nodes:
        if node.kind == "call" and any(x in varying for x in node.inputs):
            varying.add(node)
    return [node for node in body.graph.nodes if node.kind == "call" and node not in varying]


def unrolled(step, init, xs, reverse=False):
    """The loop ``scan`` stands for, written out: ``step`` at each t, the y_t stacked on axis 1 in time order."""
    carry, ys = init, {}
    length = (xs[0] if isinstance(xs, tuple) else xs).shape[1]
    for t in reversed(range(length)) if reverse else range(length):
        carry, ys[t] = step(carry, tuple(x[:, t] for x in xs) if isinstance(xs, tuple) else xs[:, t])
    ys = [ys[t] for t in range(length)]
    if ys[0] is None:
        return carry, None
    if isinstance(ys[0], tuple):
        return carry, tuple(ag.stack(parts, axis=1) for parts in zip(*ys))
    return carry, ag.stack(ys, axis=1)


def both(step, reverse=False):
    """``(scanned, unrolled)``: f(init, xs) -> (final, ys) through ``ag.scan`` and through the Python loop."""
    return (lambda init, xs: ag.scan(step, init, xs, reverse=reverse),
            lambda init, xs: unrolled(step, init, xs, reverse=reverse))


def flat(result) -> list:
    """The arrays of (final, ys), tuples flattened, None left out."""
    out = []
    for part in result:
        out += list(part) if isinstance(part, (tuple, list)) else [] if part is None else [part]
    return out


def assert_same(scanned, looped, inputs):
    """The scan's and the loop's outputs, compiled on ``inputs``, are equal bit for bit; no body of the scan holds
    work that depends on neither the carry nor a time step."""
    graph = ag.trace(lambda **xs: flat(scanned(*xs.values())), **inputs)
    assert bodies(graph) and not any(invariant_work(body) for body in bodies(graph))
    got = graph.compile()(**inputs)
    expected = compiled(lambda **xs: flat(looped(*xs.values())), **inputs)(**inputs)
    assert len(got) == len(expected)
    for a, b in zip(got, expected):
        assert a.shape == b.shape
        np.testing.assert_array_equal(a, b)


def gru_step(cell, project_inside=True):
    """The cell's step, its input projected in the step or already (as ``nn.Recurrent`` does)."""
    def step(h, x):
        new = cell.step(cell.project(x) if project_inside else x, h)
        return new, new
    return step


# ---------------------------------------------------------------------------------------------------------- values


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("project_inside", [True, False])
def test_a_gru_scan_is_the_unrolled_loop_bit_for_bit(rng, reverse, project_inside):
    cell = GRUCell(IN, H, rng)
    x = rng.standard_normal((B, T, IN if project_inside else 3 * H)).astype(np.float32)
    h = rng.standard_normal((B, H)).astype(np.float32)
    assert_same(*both(gru_step(cell, project_inside), reverse), dict(init=h, xs=x))


@pytest.mark.parametrize("reverse", [False, True])
def test_an_lstm_scan_with_a_tuple_carry_is_the_unrolled_loop_bit_for_bit(rng, reverse):
    """The carry (h, c) is packed in one row; the output h is read from the carry's columns, not stored again."""
    cell = LSTMCell(IN, H, rng)
    x = rng.standard_normal((B, T, IN)).astype(np.float32)
    h, c = rng.standard_normal((2, B, H)).astype(np.float32)

    def step(state, x):
        h, c = cell.step(cell.project(x), state)
        return (h, c), h
    scanned, looped = both(step, reverse)
    assert_same(lambda h, c, xs: scanned((h, c), xs), lambda h, c, xs: looped((h, c), xs), dict(h=h, c=c, xs=x))
    body, = bodies(ag.trace(lambda h, c, xs: scanned((h, c), xs), h=h, c=c, xs=x))
    assert (body.carry_size, body.width) == (2 * H, 2 * H)


OUTPUTS = {        # what a step emits besides its new carry tanh(h + x)
    "none": lambda new, h, x: None,
    "the carry": lambda new, h, x: new,
    "the old carry": lambda new, h, x: h,
    "a tuple": lambda new, h, x: (new * x, ag.softmax(new, axis=-1), new),
    "a 2-d output": lambda new, h, x: ag.expand_dims(new, -1) * ag.expand_dims(x, 1),
}


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("output", OUTPUTS)
def test_ys_none_a_tuple_or_the_carry(rng, output, reverse):
    def step(h, x):
        new = ag.tanh(h + x)
        return new, OUTPUTS[output](new, h, x)
    x, h = rng.standard_normal((B, T, H)), rng.standard_normal((B, H))
    assert_same(*both(step, reverse), dict(init=h, xs=x))
    width = {"none": H, "the carry": H, "the old carry": 2 * H, "a tuple": 3 * H, "a 2-d output": H + H * H}
    body, = bodies(ag.trace(lambda init, xs: ag.scan(step, init, xs)[0], init=h, xs=x))
    assert body.width == width[output]


def test_several_sequences_of_other_dtypes(rng):
    """A tuple of sequences, one a boolean mask: the step reads a tuple of their time steps."""
    x, h = rng.standard_normal((B, T, H)), rng.standard_normal((B, H))
    mask = np.array([[True, True, False, False], [True] * T])

    def step(h, inputs):
        x, real = inputs
        return ag.where(ag.expand_dims(real, -1), ag.tanh(h + x), h), None
    scanned, looped = both(step)
    assert_same(lambda h, x, m: scanned(h, (x, m)), lambda h, x, m: looped(h, (x, m)), dict(h=h, x=x, m=mask))
    final = compiled(lambda h, x, m: ag.scan(step, h, (x, m))[0], h=h, x=x, m=mask)(h=h, x=x, m=mask)
    expected = h.copy()
    for t in range(T):
        expected = np.where(mask[:, t, None], np.tanh(expected + x[:, t]), expected)
    np.testing.assert_allclose(final, expected, rtol=1e-14)


def test_a_sequence_the_step_does_not_read(rng):
    x, y, h = rng.standard_normal((B, T, H)), rng.standard_normal((B, T, H)), rng.standard_normal((B, H))
    scanned, looped = both(lambda h, xy: (ag.tanh(h) + xy[1], None))
    assert_same(lambda h, x, y: scanned(h, (x, y)), lambda h, x, y: looped(h, (x, y)), dict(h=h, x=x, y=y))


def test_one_graph_runs_every_length_and_batch(rng):
    """T and B symbolic: one scan node, run at lengths 1 … 6, equal to the loop unrolled at each length."""
    cell = GRUCell(IN, H, rng)
    run = compiled(lambda init, xs: ag.scan(gru_step(cell), init, xs),
                   init=ag.Input(("B", H)), xs=ag.Input(("B", "T", IN)))
    assert sum(node.op == "scan" for node in run.graph.nodes) == 1
    for batch, length in [(2, 1), (3, 2), (1, 6)]:
        x = rng.standard_normal((batch, length, IN)).astype(np.float32)
        h = rng.standard_normal((batch, H)).astype(np.float32)
        final, ys = run(init=h, xs=x)
        looped = compiled(lambda init, xs: unrolled(gru_step(cell), init, xs), init=h, xs=x)(init=h, xs=x)
        assert ys.shape == (batch, length, H)
        np.testing.assert_array_equal(final, looped[0])
        np.testing.assert_array_equal(ys, looped[1])


def test_one_gradient_graph_runs_every_length_batch_and_memory_length(rng):
    """B, T and the memory's length S symbolic in the gradient too: its graph, compiled once, gives at each size the
    gradients of a graph traced at that size."""
    def objective(h, x, m):
        step = attention_step(m)
        final, ys = ag.scan(lambda c, x_t: (step(c, x_t)[0],) * 2, h, x)     # weights (rows, S): not an output
        return ag.sum(ag.tanh(ys)) + ag.sum(final * final)
    run = ag.trace(objective, h=ag.Input(("B", H)), x=ag.Input(("B", "T", H)), m=ag.Input(("B", "S", H))) \
        .grad(wrt=["h", "x", "m"]).compile()
    for batch, length, memory in [(2, 1, 3), (3, 4, 2), (1, 6, 5)]:
        feeds = dict(h=rng.standard_normal((batch, H)), x=rng.standard_normal((batch, length, H)),
                     m=rng.standard_normal((batch, memory, H)))
        feeds = {k: v.astype(np.float32) for k, v in feeds.items()}
        expected = ag.trace(objective, **feeds).grad(wrt=["h", "x", "m"]).compile()(**feeds)
        for got, want in zip(run(**feeds), expected):
            assert got.shape == want.shape
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def attention_step(memory):
    """An attention over ``memory`` (B, S, H) inside the step: weights softmax(memory · h), context Σ w·tanh(memory)."""
    def step(h, x):
        weights = ag.softmax(ag.sum(memory * ag.expand_dims(h, 1), axis=-1), axis=-1)
        context = ag.sum(ag.expand_dims(weights, -1) * ag.tanh(memory), axis=1)
        new = ag.tanh(x + context + h)
        return new, (new, weights)
    return step


def test_attention_over_a_closed_over_memory(rng):
    """The memory (B, S, H) is a constant of the loop with the batch's rows; tanh(memory), which needs no carry, is
    computed once before the loop, not at every step."""
    x, h, memory = rng.standard_normal((B, T, H)), rng.standard_normal((B, H)), rng.standard_normal((B, S, H))
    scanned = lambda h, x, m: ag.scan(attention_step(m), h, x)
    assert_same(scanned, lambda h, x, m: unrolled(attention_step(m), h, x), dict(h=h, x=x, m=memory))
    node, = [node for node in ag.trace(scanned, h=h, x=x, m=memory).nodes if node.op == "scan"]
    assert node.attrs["body"].batched == (True, True)
    assert [(c.op, c.shape) for c in node.inputs[2:]] == [("input", (B, S, H)), ("tanh", (B, S, H))]
    assert [node.attrs["body"].graph.inputs[f"c{j}"].shape for j in range(2)] == [("rows", S, H)] * 2
    final, ys, weights = compiled(scanned, h=h, x=x, m=memory)(h=h, x=x, m=memory)
    np.testing.assert_allclose(weights.sum(-1), np.ones((B, T)), rtol=1e-14)


def additive_step(keys, values):
    """Additive attention inside the step: weights softmax(Σ_h tanh(keys + h)), context Σ weights · values."""
    def step(h, x):
        weights = ag.softmax(ag.sum(ag.tanh(keys + ag.expand_dims(h, 1)), axis=-1), axis=-1)
        context = ag.sum(ag.expand_dims(weights, -1) * values, axis=1)
        new = ag.tanh(x + context + h)
        return new, (new, weights)
    return step


def test_the_keys_gradient_is_summed_over_the_steps_by_the_reverse_loop(rng):
    """The keys and values (B, S, H), constants of the loop with the batch's rows. The keys' gradient at a step is the
    gradient of tanh's input, which the reverse loop computes for ∂h anyway: it is summed there, in the loop's carry
    past ∂carry, and taken from its last carry: no (B, T, S, H) value of it is summed after the loop. The values'
    gradient, weights ⊗ ∂context, is left to the pass over all steps. Both are the unrolled loop's up to
    rounding (sums in another order)."""
    shapes = dict(h=(B, H), x=(B, T, H), k=(B, S, H), v=(B, S, H))
    inputs = {name: rng.standard_normal(shape) for name, shape in shapes.items()}

    def objective(looped):
        def loss(h, x, k, v):
            final, (ys, weights) = looped(additive_step(k, v), h, x)
            return ag.sum(ag.tanh(ys)) + ag.sum(weights * weights) + ag.sum(final * final)
        return ag.trace(loss, **inputs).grad(wrt=list(shapes)).compile()
    scanned, expected = objective(ag.scan), objective(unrolled)
    backward, = (n for n in scanned.graph.nodes if n.op == "scan" and n.attrs["reverse"])
    assert backward.attrs["body"].carry_size == H + S * H
    summed_after = [n for n in scanned.graph.nodes if n.op == "sum" and n.inputs[0].shape == (B, T, S, H)]
    assert len(summed_after) == 1                                    # the values' alone
    for got, want in zip(scanned(**inputs), expected(**inputs)):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)


class Decoder(ag.nn.Module):
    """A step reading parameters, a tensor computed from parameters alone outside the step (``mixing``), and work
    on parameters alone inside it (tanh(bias)), which is hoisted out of the loop."""

    def __init__(self, rng):
        super().__init__()
        self.input, self.hidden = ag.nn.Linear(H, H, rng=rng), ag.nn.Linear(H, H, rng=rng)
        self.bias = ag.nn.Parameter(rng.standard_normal(H).astype(np.float32))

    def step(self, mixing):
        def step(h, x):
            new = ag.tanh(self.input(x) + ag.matmul(self.hidden(h), mixing) + ag.tanh(self.bias))
            return new, new
        return step

    def forward(self, h, x):
        mixing = ag.softmax(ag.matmul(self.hidden.weight, ag.transpose(self.hidden.weight)), axis=-1)
        return ag.scan(self.step(mixing), h, x)

    def unrolled(self, h, x):
        mixing = ag.softmax(ag.matmul(self.hidden.weight, ag.transpose(self.hidden.weight)), axis=-1)
        return unrolled(self.step(mixing), h, x)


def test_parameters_and_tensors_of_parameters_are_unbatched_constants_and_their_work_is_hoisted(rng):
    decoder = Decoder(rng)
    x, h = rng.standard_normal((B, T, H)).astype(np.float32), rng.standard_normal((B, H)).astype(np.float32)
    graph = ag.trace(decoder, h=h, x=x)
    body, = bodies(graph)
    assert invariant_work(body) == []
    assert not any(body.batched) and len(body.batched) == 6      # 2 weights, 2 biases, mixing and tanh(bias)
    assert "tanh" in {node.op for node in graph.nodes}           # tanh(bias), before the loop
    for got, expected in zip(compiled(decoder, h=h, x=x)(h=h, x=x), compiled(decoder.unrolled, h=h, x=x)(h=h, x=x)):
        np.testing.assert_array_equal(got, expected)


def test_a_scan_inside_a_step(rng):
    """A nested scan: each outer step runs an inner loop over a sequence computed from its x_t."""
    def inner_step(d, u):
        return ag.tanh(d * u + 0.5), d

    def outer_step(c, x):
        inner = ag.expand_dims(x, 1) * np.array([1.0, -0.5, 2.0]).reshape(1, 3, 1)
        final, ys = ag.scan(inner_step, c, inner)
        return final + x, ag.sum(ys, axis=1)

    def looped(h, x):
        def outer(c, x):
            inner = ag.expand_dims(x, 1) * np.array([1.0, -0.5, 2.0]).reshape(1, 3, 1)
            final, ys = unrolled(inner_step, c, inner)
            return final + x, ag.sum(ys, axis=1)
        return unrolled(outer, h, x)
    x, h = rng.standard_normal((B, T, H)), rng.standard_normal((B, H))
    assert_same(lambda h, x: ag.scan(outer_step, h, x), looped, dict(h=h, x=x))
    outer, = bodies(ag.trace(lambda h, x: ag.scan(outer_step, h, x), h=h, x=x))
    assert len(bodies(outer.graph)) == 1


# ------------------------------------------------------------------------------------------------------- gradients


def squashed(part):
    """A scalar reading ``part`` nonlinearly."""
    return ag.sum(ag.tanh(part) * ag.sin(part))


def loss(final, ys):
    """A scalar reading every part of (final, ys) nonlinearly."""
    total = 0.0
    for part in flat((final, ys)):
        total = total + squashed(part)
    return total


GRADIENT_GRU = GRUCell(IN, H, np.random.default_rng(5)).astype(np.float64)
GRADIENT_LSTM = LSTMCell(IN, H, np.random.default_rng(6)).astype(np.float64)


def lstm_step(state, x):
    h, c = GRADIENT_LSTM.step(GRADIENT_LSTM.project(x), state)
    return (h, c), h


def memory_and_its_sum(m):
    """A step reading the memory and a constant computed from it: each input's gradient is counted once."""
    def step(h, x):
        return ag.tanh(x + ag.sum(m * ag.expand_dims(h, 1), axis=1) + ag.sum(m, axis=1) * h), h
    return step


def nested(h, x):
    def outer(c, x):
        inner = ag.expand_dims(x, 1) * np.array([1.0, -2.0]).reshape(1, 2, 1)
        final, ys = ag.scan(lambda d, u: (ag.tanh(d * u + c), d), c, inner)
        return final + x, ag.sum(ys, axis=1)
    return ag.scan(outer, h, x)


def mixed_and_reshaped(w):
    """A step whose rows read the whole batch (a mean over it), multiplied through a reshape by ``w``: w's gradient,
    taken over all steps at once, reads that reshape."""
    def step(c, x_t):
        scaled = ag.reshape(x_t * ag.mean(x_t * x_t), (-1, 2, H // 2))
        return ag.tanh(c + ag.reshape(scaled, (-1, H)) @ w), c
    return step


GRADIENT_CASES = {    # name: (f(float64 arrays) -> (final, ys), the arrays' shapes)
    "gru": (lambda h, x: ag.scan(gru_step(GRADIENT_GRU), h, x), [(B, H), (B, 3, IN)]),
    "gru reversed": (lambda h, x: ag.scan(gru_step(GRADIENT_GRU), h, x, reverse=True), [(B, H), (B, 3, IN)]),
    "lstm, a tuple carry": (lambda h, c, x: ag.scan(lstm_step, (h, c), x), [(B, H), (B, H), (B, 3, IN)]),
    "ys none": (lambda h, x: ag.scan(lambda h, x: (ag.tanh(h * x + x), None), h, x), [(B, H), (B, 3, H)]),
    "ys a tuple": (lambda h, x: ag.scan(lambda h, x: (ag.tanh(h * x + x), (h * x, ag.softmax(h + x, axis=-1))), h, x),
                   [(B, H), (B, 3, H)]),
    "no constant": (lambda h, x: ag.scan(lambda c, x: (ag.tanh(c * x), c * c), h, x), [(B, H), (B, 3, H)]),
    "attention over a memory": (lambda h, x, m: ag.scan(attention_step(m), h, x), [(B, H), (B, 3, H), (B, S, H)]),
    "a memory and its sum": (lambda h, x, m: ag.scan(memory_and_its_sum(m), h, x), [(B, H), (B, 3, H), (B, S, H)]),
    "a mean of the sequence": (lambda h, x: ag.scan(lambda c, xt: (ag.tanh(c * ag.mean(x, axis=1) + xt), None), h, x),
                               [(B, H), (B, 3, H)]),
    "init read in the step": (lambda h, x: ag.scan(lambda c, x: (ag.tanh(c * h + x), c), h, x), [(B, H), (B, 3, H)]),
    "a constant without the batch": (lambda h, x, w: ag.scan(lambda c, x: (ag.tanh(c @ ag.tanh(w) + x), None), h, x),
                                     [(B, H), (B, 3, H), (H, H)]),
    "nested": (nested, [(B, H), (B, 3, H)]),
    "a mean over the batch": (lambda h, x: ag.scan(lambda c, xt: (ag.tanh(c + xt * ag.mean(xt * c)), c), h, x),
                              [(B, H), (B, 3, H)]),
    "a mean over the batch, reshaped": (lambda h, x, w: ag.scan(mixed_and_reshaped(w), h, x),
                                        [(B, H), (B, 3, H), (H, H)]),
}


@pytest.mark.parametrize("case", GRADIENT_CASES)
def test_gradients_match_central_differences(case):
    fn, shapes = GRADIENT_CASES[case]
    rng = np.random.default_rng(7)
    gradcheck(lambda *xs: loss(*fn(*xs)), *(rng.standard_normal(shape) for shape in shapes)).raise_if_failed()


@pytest.mark.parametrize("reverse", [False, True])
def test_gradients_of_the_parameters_read_in_the_step_match_central_differences(reverse):
    rng = np.random.default_rng(8)
    gradcheck_parameters(lambda h, x: loss(*ag.scan(gru_step(GRADIENT_GRU), h, x, reverse=reverse)), GRADIENT_GRU,
                         rng.standard_normal((B, H)), rng.standard_normal((B, 3, IN))).raise_if_failed()


def test_gradients_of_parameters_and_of_work_hoisted_from_them_match_central_differences():
    rng = np.random.default_rng(8)
    decoder = Decoder(rng).astype(np.float64)
    gradcheck_parameters(lambda h, x: loss(*decoder(h, x)), decoder, rng.standard_normal((B, H)),
                         rng.standard_normal((B, 3, H))).raise_if_failed()


@pytest.mark.parametrize("final_only", [False, True])
def test_second_order_gradients_match_central_differences(final_only):
    """The VJP is made of scans and ordinary ops, so it has a gradient itself: d/d(h, x) of |∂L/∂h|² + |∂L/∂x|², L
    of every output or (``final_only``: the reverse loop starting from the final state's gradient) of the last."""
    rng = np.random.default_rng(9)

    def penalty(h, x):
        final, ys = ag.scan(lambda c, xt: (ag.tanh(c * xt + xt), c * c), h, x)
        dh, dx = ag.gradients(squashed(final) if final_only else loss(final, ys), [h, x])
        return ag.sum(dh * dh) + ag.sum(dx * dx)
    gradcheck(penalty, rng.standard_normal((B, H)), rng.standard_normal((B, 3, H))).raise_if_failed()



def test_the_gradient_runs_the_forward_once_and_reads_its_residuals(rng):
    """The compiled gradient of a GRU scan holds two loops: the forward, extended with the residuals (the gates) and
    run as the user's loop too (passes/scans.py), whose loss is the forward graph's bit for bit; and the reverse loop,
    which computes no sigmoid or tanh (it reads them) and no weight gradient (done after it, over all B·T rows)."""
    cell = GRUCell(IN, H, rng)
    inputs = {"h": rng.standard_normal((B, H)), "x": rng.standard_normal((B, T, IN))}
    inputs = {name: value.astype(np.float32) for name, value in inputs.items()}
    traced = ag.trace(lambda h, x: loss(*ag.scan(gru_step(cell), h, x)), **inputs)
    executable = traced.grad().compile()
    scans = sorted((n for n in executable.graph.nodes if n.op == "scan"), key=lambda n: n.attrs["reverse"])
    assert [n.attrs["reverse"] for n in scans] == [False, True]
    forward, backward = (n.attrs["body"] for n in scans)
    assert forward.base is not None and forward.width > forward.base.width
    reverse_ops = {n.op for n in backward.graph.nodes}
    assert not reverse_ops & {"sigmoid", "tanh"} and "matmul" in reverse_ops
    assert all(n.shape[0] == "rows" for n in backward.graph.nodes if n.op == "matmul")
    assert not any(n.op == "transpose" and n in scans[1].inputs for n in executable.graph.nodes)   # Wᵀ read in place
    np.testing.assert_array_equal(executable(**inputs)[0], traced.compile()(**inputs))

def test_a_value_read_back_through_a_slice_of_its_columns_is_stored_as_that_slice(rng):
    """The GRU's reverse step reads of W_h·h (3H columns, its three gates' products) only the candidate's H
    (r ∘ (W_hn·h + b_hn)'s gradient): the forward row emits those H columns, so it holds the carry, which is the
    output too (H), z, r, n and h_{t−1} (4H) and W_hn·h + b_hn (H), 6H where the whole product made it 8H."""
    cell = GRUCell(IN, H, rng)
    inputs = {"h": rng.standard_normal((B, H)), "x": rng.standard_normal((B, T, IN))}
    inputs = {name: value.astype(np.float32) for name, value in inputs.items()}
    traced = ag.trace(lambda h, x: loss(*ag.scan(gru_step(cell), h, x)), **inputs)
    executable = traced.grad().compile()
    forward, = (n.attrs["body"] for n in executable.graph.nodes if n.op == "scan" and not n.attrs["reverse"])
    assert forward.width == 6 * H
    np.testing.assert_array_equal(executable(**inputs)[0], traced.compile()(**inputs))


def gradient_loops(objective, *arrays):
    """The objective's gradients (of the arrays and the parameters) on ``arrays``, the sequences the reverse loop
    reads (the scan reading the forward loop extended with its residuals) and the gradient's nodes."""
    names = [f"a{i}" for i in range(len(arrays))]
    traced = ag.trace(lambda **xs: objective(*xs.values()), **dict(zip(names, arrays)))
    step = traced.grad(wrt=[*names, *traced.parameters]).compile()
    backward, = (n for n in step.graph.nodes if n.op == "scan" and n.inputs[1].op == "scan")
    sequences = backward.inputs[1:1 + backward.attrs["body"].sequences]
    return step(**dict(zip(names, arrays))), sequences, step.graph.nodes


def three_outputs(c, xt):
    """A step emitting three values past its carry, of H, IN and H columns."""
    y = ag.tanh(c * xt[:, :H] + 1.0)
    return y, (y * c, ag.sin(xt), c * c)


PIECES = {    # name: (f(float64 arrays) -> what a loss reads of the loop, x's width, the widths of g's pieces)
    "gru": (lambda h, x: ag.scan(gru_step(GRADIENT_GRU), h, x)[0], IN, []),
    "gru reversed": (lambda h, x: ag.scan(gru_step(GRADIENT_GRU), h, x, reverse=True)[0], IN, []),
    "gru, its last output": (lambda h, x: ag.scan(gru_step(GRADIENT_GRU), h, x)[1][:, -1], IN, []),
    "lstm, its h alone": (lambda h, x: ag.scan(lstm_step, (h, h * 0.5), x)[0][0], IN, []),
    "lstm, its c alone": (lambda h, x: ag.scan(lstm_step, (h, h * 0.5), x)[0][1], IN, []),
    "gru, its outputs": (lambda h, x: ag.scan(gru_step(GRADIENT_GRU), h, x)[1], IN, [H]),
    "gru reversed, its outputs and final state": (lambda h, x: flat(ag.scan(gru_step(GRADIENT_GRU), h, x,
                                                                             reverse=True)), IN, [H]),
    "lstm, its h at every step and its final c": (lambda h, x: (lambda final, hs: (hs, final[1]))(
        *ag.scan(lstm_step, (h, h * 0.5), x)), IN, [H]),
    "two outputs of three, a gap between them": (lambda h, x: (lambda ys: (ys[0], ys[2]))(
        ag.scan(three_outputs, h, x)[1]), IN + H, [H, H]),
}


def read_as(pieces_or_whole, monkeypatch):
    """The gradient of a scan's output read as pieces where it is a sum of them (the default), or whole."""
    from attngraph.core import scan_gradient
    if pieces_or_whole == "whole":
        monkeypatch.setattr(scan_gradient, "output_pieces", lambda g, size, reverse: scan_gradient.read_whole(g))


def read_whole(sequences) -> bool:
    """Whether the reverse loop reading ``sequences`` reads the output's gradient g (B, T, P) as one sequence."""
    body = sequences[0].attrs["body"]
    return len(sequences) > 1 and sequences[1].shape[2] == (body.base or body).width


@pytest.mark.parametrize("case", PIECES)
def test_a_gradient_scattered_into_the_output_is_read_as_its_pieces(case, monkeypatch):
    """A loss of some columns of every step and of the final state (an encoder's outputs, a classifier's or a
    bridge's final state): the output's gradient, a sum of pieces scattered into zeros, is read as those pieces, the
    final state's as the reverse loop's first carry, so no (B, T, P) gradient is made or read; the gradients match
    central differences and equal, bit for bit, those of the loop that reads the whole gradient at every step."""
    part, width, widths = PIECES[case]
    rng = np.random.default_rng(10)
    h, x = rng.standard_normal((B, H)), rng.standard_normal((B, 3, width))
    objective = lambda h, x: sum(squashed(p) for p in flat(part(h, x)))
    gradcheck(objective, h, x).raise_if_failed()
    as_pieces, sequences, nodes = gradient_loops(objective, h, x)
    pieces, xs = sequences[1:1 + len(widths)], sequences[1 + len(widths):]
    assert sequences[0].op == "scan" and [s.shape for s in pieces] == [(B, 3, w) for w in widths]
    assert all(s.op == "input" for s in xs)                                      # the x_t it reads
    assert not any(n.op == "scatter_slice" and len(n.shape) == 3 for n in nodes)
    read_as("whole", monkeypatch)
    whole, sequences, _ = gradient_loops(objective, h, x)
    assert read_whole(sequences)
    for a, b in zip(as_pieces, whole):
        np.testing.assert_array_equal(a, b)


def test_the_final_state_of_a_loop_of_symbolic_length_starts_the_reverse_loop_too():
    """Traced for any batch and length (``out[:, -1]`` of a symbolic T), the gradient of the final state enters the
    reverse loop as its carry, and equals that of the graph traced on each length's arrays."""
    objective = lambda h, x: squashed(ag.scan(gru_step(GRADIENT_GRU), h, x)[0])
    graph = ag.trace(objective, h=ag.Input(("B", H), "float64"), x=ag.Input(("B", "T", IN), "float64"))
    step = graph.grad(wrt=["h", "x"]).compile()
    backward, = (n for n in step.graph.nodes if n.op == "scan" and n.inputs[1].op == "scan")
    assert backward.attrs["body"].sequences == 1
    rng = np.random.default_rng(12)
    for batch, length in [(2, 2), (3, 5)]:
        h, x = rng.standard_normal((batch, H)), rng.standard_normal((batch, length, IN))
        expected, _, _ = gradient_loops(objective, h, x)
        for a, b in zip(step(h=h, x=x), expected):
            np.testing.assert_array_equal(a, b)


ELSEWHERE = {    # name: (f(float64 arrays) -> a part of the loop's outputs that is not the final carry, x's width)
    "an earlier step": (lambda h, x: ag.scan(gru_step(GRADIENT_GRU), h, x)[1][:, 1], IN),
    "the last step of a reversed loop": (lambda h, x: ag.scan(gru_step(GRADIENT_GRU), h, x, reverse=True)[1][:, -1],
                                         IN),
    "the columns past the carry": (lambda h, x: ag.scan(lambda c, xt: (ag.tanh(c * xt + xt), c * c), h, x)[1][:, -1],
                                   H),
}


@pytest.mark.parametrize("case", ELSEWHERE)
def test_a_gradient_reaching_other_steps_or_columns_is_read_at_every_step(case):
    part, width = ELSEWHERE[case]
    rng = np.random.default_rng(11)
    h, x = rng.standard_normal((B, H)), rng.standard_normal((B, 3, width))
    objective = lambda h, x: squashed(part(h, x))
    gradcheck(objective, h, x).raise_if_failed()
    _, sequences, _ = gradient_loops(objective, h, x)
    assert read_whole(sequences)


def test_a_gradient_of_pieces_sharing_columns_or_placed_on_one_step_is_read_whole():
    """``output_pieces`` on gradients that no user's unpacking makes but that a sum could: two pieces sharing columns,
    a piece on one step that is not the last, a last step's piece past the carry; and one it splits."""
    from attngraph.core import tensor as F
    from attngraph.core.scan_gradient import output_pieces
    from attngraph.core.tracing import building

    def placed(*parts):
        first, *rest = (F.emit("scatter_slice", F.ones(shape), shape=(B, T, 10), index=index) for shape, index in parts)
        return sum(rest, first)
    every, last = (slice(None), slice(None)), (slice(None), -1)
    with building(ag.Graph()):
        cases = {"sharing columns": placed(((B, T, 3), (*every, slice(0, 3))), ((B, T, 3), (*every, slice(2, 5)))),
                 "an earlier step": placed(((B, 4), (slice(None), 1, slice(0, 4))),),
                 "the last step past the carry": placed(((B, 2), (*last, slice(4, 6))),),
                 "apart": placed(((B, T, 3), (*every, slice(7, 10))), ((B, 2), (*last, slice(1, 3))),
                                 ((B, T, 2), (*every, slice(0, 2))))}
        for name, g in cases.items():
            finals, pieces = output_pieces(g, 4, reverse=False)
            layout = [(c.start, c.stop) for _, c in finals], [(c.start, c.stop) for _, c in pieces]
            assert layout == (([(1, 3)], [(0, 2), (7, 10)]) if name == "apart" else ([], [(0, 10)])), name


def test_the_gate_gradients_pass_as_one_slice_that_no_concatenation_copies(rng, monkeypatch):
    """A GRU over a projected input: the reverse loop emits the gradients of the projection's three gate slices side by
    side, in the slices' order, so that the weight gradients read them as one slice of its output; the gradients are
    those of the loop emitting them in any order, bit for bit."""
    from attngraph.core import scan_gradient
    from attngraph.nn import GRU
    x = rng.standard_normal((B, T, IN)).astype(np.float32)

    def gradients():
        encoder = GRU(IN, H, rng=np.random.default_rng(0))
        graph = ag.trace(lambda x: ag.sum(ag.tanh(encoder(x)[0])), x=x).grad()
        step = graph.compile()
        joins = [n for n in step.graph.nodes if n.op == "concat" and all(x.op == "getitem" for x in n.inputs)]
        return step(x=x), joins
    side_by_side, joins = gradients()
    monkeypatch.setattr(scan_gradient, "side_by_side", lambda values, graph: list(values)[::-1])
    any_order, copied = gradients()
    assert joins == [] and len(copied) == 1
    for a, b in zip(side_by_side, any_order):
        np.testing.assert_array_equal(a, b)


# ------------------------------------------------------------------------------------------------------ bad inputs


def new_state(h, x):
    return ag.tanh(h + x), h


H0, X0 = np.zeros((B, H), np.float32), np.zeros((B, T, H), np.float32)
BAD = {     # name: (fn of the inputs, the inputs besides h and x, the error, what it says)
    "a step that is not a function": (lambda h, x: ag.scan(3, h, x), {}, ag.TracingError,
                                      r"step must be a function step\(carry, x_t\).*got int"),
    "no sequence": (lambda h, x: ag.scan(new_state, h, ()), {}, ag.ShapeError, "at least one sequence in xs"),
    "xs None": (lambda h, x: ag.scan(new_state, h, None), {}, ag.TracingError, "xs is None"),
    "init None": (lambda h, x: ag.scan(new_state, None, x), {}, ag.TracingError, "init is None"),
    "another batch": (lambda h, x, y: ag.scan(new_state, h, y), dict(y=np.zeros((3, T, H), np.float32)),
                      ag.ShapeError, r"xs must be \(B, T, …\) of one batch B; got \(3, 4, 4\) beside \(2, 4\)"),
    "another symbolic batch": (lambda h, x, y, c: ag.scan(new_state, c, y), dict(
        y=ag.Input(("C", "T", H)), c=ag.Input(("B", H))), ag.ShapeError, r"got \(C, T, 4\) beside \(B, 4\)"),
    "two lengths": (lambda h, x, y: ag.scan(lambda h, xy: (ag.tanh(h + xy[0] + xy[1]), None), h, (x, y)),
                    dict(y=np.zeros((B, T + 1, H), np.float32)), ag.ShapeError,
                    r"one length: \(2, 4, 4\), \(2, 5, 4\)"),
    "a sequence without a time axis": (lambda h, x: ag.scan(new_state, h, x[:, 0, 0]), {}, ag.ShapeError,
                                       r"xs must be \(B, T, …\).*got \(2,\)"),
    "an empty time axis": (lambda h, x: ag.scan(new_state, h, x[:, :0]), {}, ag.ShapeError,
                           r"at least one time step; its sequences are empty: \(2, 0, 4\)"),
    "a carry of another shape": (lambda h, x: ag.scan(lambda h, x: (ag.concat([h, x], -1), None), h, x), {},
                                 ag.ShapeError, r"carry like init \(\(rows, 4\) float32\), got \(rows, 8\) float32"),
    "a carry of another dtype": (lambda h, x: ag.scan(lambda h, x: ((h + x).astype(np.float64), None), h, x), {},
                                 ag.ShapeError, r"carry like init \(\(rows, 4\) float32\), got \(rows, 4\) float64"),
    "one tensor for a tuple carry": (lambda h, x: ag.scan(lambda s, x: (s[0] + x, None), (h, h), x), {},
                                     ag.ShapeError, r"carry like init \(\(rows, 4\) float32, \(rows, 4\) float32\)"),
    "an integer carry": (lambda h, x, n: ag.scan(lambda n, x: (n + 1, None), n, x), dict(n=np.zeros((B, H), int)),
                         ag.DTypeError, r"init must be floating point.*got \(2, 4\) int64"),
    "carry parts of two dtypes": (lambda h, x, d: ag.scan(lambda s, x: (s, None), (h, d), x),
                                  dict(d=np.zeros((B, H))), ag.DTypeError, r"init \(float32\).*got \(2, 4\) float64"),
    "symbolic sizes in the carry": (lambda h, x, c, y: ag.scan(new_state, c, y), dict(
        c=ag.Input(("B", "D")), y=ag.Input(("B", "T", "D"))), ag.ShapeError,
        r"init must have concrete sizes past the batch .*got \(B, D\)"),
    "symbolic sizes in an output": (lambda h, x, m: ag.scan(lambda h, x: (h + x, m * ag.expand_dims(h, 1)), h, x),
                                    dict(m=ag.Input((B, "S", H))), ag.ShapeError,
                                    r"output y_t of scan's step must have concrete sizes.*got \(rows, S, 4\)"),
    "an output of another dtype": (lambda h, x: ag.scan(lambda h, x: (h + x, ag.argmax(h, -1)), h, x), {},
                                   ag.DTypeError, r"output y_t .*floating point.*got \(rows,\) int64"),
    "an output without the batch": (lambda h, x: ag.scan(lambda h, x: (h + x, ag.ones(H)), h, x), {},
                                    ag.ShapeError, r"returned node .*shape \(4,\).* as an output: it must be \(B, …\)"),
    "a step returning a tensor": (lambda h, x: ag.scan(lambda h, x: h + x, h, x), {}, ag.TracingError,
                                  r"must return a pair \(new carry, y_t\).*got node .*\(add, shape \(rows, 4\)"),
    "a step returning three": (lambda h, x: ag.scan(lambda h, x: (h, x, h), h, x), {}, ag.TracingError,
                               "must return a pair .*got a tuple of 3"),
    "a step reading neither carry nor x_t": (lambda h, x: ag.scan(lambda c, xt: (h * 2, None), h, x), {},
                                             ag.TracingError, "depends on neither the carry nor the time step"),
    "a step branching on a traced value": (
        lambda h, x: ag.scan(lambda h, x: (h if ag.sum(h) > 0 else x, None), h, x), {}, ag.TracingError,
        r"cannot branch on a traced value .*greater"),
}


@pytest.mark.parametrize("case", BAD)
def test_bad_inputs_and_steps_are_refused_while_tracing_naming_what_is_wrong(case):
    fn, inputs, error, message = BAD[case]
    with pytest.raises(error, match=message):
        ag.trace(fn, h=H0, x=X0, **inputs)


def test_the_gradient_of_a_step_mixing_the_batch_in_a_value_of_symbolic_size_is_refused():
    """A row's value read from other rows of its step is computed by a loop; one that cannot pass between the loop
    and the pass over all B·T rows (here (rows, S), S symbolic) makes the gradient an error, not a wrong number."""
    def objective(h, x, m):
        def step(c, x_t):
            weights = ag.softmax(ag.sum(m * ag.expand_dims(c, 1), axis=-1), axis=-1)
            weights = weights * ag.mean(weights)                 # a mean over the whole batch
            return ag.tanh(c + x_t + ag.sum(ag.expand_dims(weights, -1) * m, axis=1)), None
        return ag.sum(ag.scan(step, h, x)[0])
    graph = ag.trace(objective, h=ag.Input(("B", H)), x=ag.Input(("B", "T", H)), m=ag.Input(("B", "S", H)))
    with pytest.raises(ag.AttnGraphError, match="mixes the examples of the batch"):
        graph.grad(wrt=["h"])


def test_a_run_of_length_zero_is_refused():
    run = compiled(lambda h, x: ag.scan(new_state, h, x)[0], h=ag.Input(("B", H)), x=ag.Input(("B", "T", H)))
    with pytest.raises(ag.BindingError, match="at least one time step.* T = 0"):
        run(h=H0, x=X0[:, :0])


def test_a_memory_of_another_batch_is_refused_when_fed():
    def final(h, x, m):
        return ag.scan(lambda h, x: (attention_step(m)(h, x)[0], None), h, x)[0]
    run = compiled(final, h=ag.Input(("B", H)), x=ag.Input(("B", "T", H)), m=ag.Input(("B", "S", H)))
    with pytest.raises(ag.BindingError, match="dimension B is 2 elsewhere but 3"):
        run(h=H0, x=X0, m=np.zeros((3, S, H), np.float32))


# ------------------------------------------------------------------------------------------------------ debug mode


class Encoder(ag.nn.Module):
    """A step c_t = sqrt(c_{t−1} ∘ x_t): a NaN where c ∘ x_t < 0, an infinite derivative where it is 0."""

    def forward(self, h, x):
        final, ys = ag.scan(lambda c, xt: (ag.sqrt(c * xt), None), h, x)
        return ag.sum(final)


class Model(ag.nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = Encoder()

    def forward(self, h, x):
        return self.encoder(h, x)


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning", "ignore:divide by zero:RuntimeWarning")
def test_debug_mode_names_the_body_node_and_the_time_step_of_a_nan_in_the_forward():
    model, h, x = Model(), np.ones((B, H)), np.ones((B, T, H))
    x[:, 2] = -1.0
    run = compiled(model, h=h, x=x)
    with ag.debug(), pytest.raises(ag.NonFiniteError, match=r"time step 2 of 4: NaN in the output of node n\d+ "
                                                            r"\(sqrt, shape \(rows, 4\) float64\) in scope 'encoder'"):
        run(h=h, x=x)
    assert np.isnan(run(h=h, x=x))                                  # outside debug mode the NaN is the result


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning", "ignore:divide by zero:RuntimeWarning")
def test_debug_mode_names_the_body_node_and_the_time_step_of_an_inf_in_the_backward():
    """x_2 = 0 makes carry_2 = 0, finite; step 3's derivative of sqrt(carry_2 ∘ x_3) is 1/0, met first by the
    backward loop (t = 3 … 0)."""
    model, h, x = Model(), np.ones((B, H)), np.ones((B, T, H))
    x[:, 2] = 0.0
    run = ag.trace(model, h=h, x=x).grad(wrt=["h"]).compile()
    with ag.debug(), pytest.raises(ag.NonFiniteError, match=r"time step 3 of 4: Inf in the output of node n\d+ "
                                                            r"\(div, shape \(rows, 4\) float64\) in scope 'encoder'"):
        run(h=h, x=x)
    with ag.debug():
        run(h=h, x=np.ones((B, T, H)))


# ------------------------------------------------------------------------------------------ devices and training


class TinyGRU(ag.nn.Module):
    """A loss of a GRU's final state and of its outputs at every step (the reverse loop reading the outputs' piece of
    the output's gradient, starting from the final state's), or (``final_only``: reading no piece) of the final state
    alone."""

    def __init__(self, final_only=False):
        super().__init__()
        self.cell, self.final_only = GRUCell(3, 4, np.random.default_rng(10)), final_only

    def forward(self, h, x):
        final, ys = ag.scan(gru_step(self.cell), h, x)
        return ag.sum(final * final) + (0.0 if self.final_only else
                                        ag.sum(ag.tanh(ys) * ag.arange(3, dtype=np.float32).reshape(1, 3, 1)))


@pytest.mark.parametrize("final_only", [False, True])
def test_a_gru_scan_and_its_gradient_on_every_device_are_the_cpus(device, final_only):
    rng = np.random.default_rng(11)
    h, x = rng.standard_normal((2, 4)).astype(np.float32), rng.standard_normal((2, 3, 3)).astype(np.float32)
    model = TinyGRU(final_only)
    graph = ag.trace(model, h=h, x=x)
    graph = graph.grad(wrt=["h", "x", *graph.parameters])
    expected = graph.compile("cpu")(h=h, x=x)
    got = graph.compile(device.name)(h=h, x=x)
    assert len(got) == 1 + 2 + 4                 # the value, d/dh, d/dx, each weight and bias
    for a, b in zip(got, expected):
        np.testing.assert_allclose(a, b, rtol=2e-6, atol=2e-6)


def test_the_gradient_of_an_attention_over_a_memory_on_every_device_is_the_cpus(device):
    """The reverse loop summing the keys' gradient in its carry runs on every device."""
    rng = np.random.default_rng(12)
    inputs = {name: rng.standard_normal(shape).astype(np.float32)
              for name, shape in dict(h=(2, 4), x=(2, 3, 4), m=(2, 3, 4)).items()}

    def loss(h, x, m):
        final, (ys, weights) = ag.scan(additive_step(m, m * 0.5), h, x)
        return ag.sum(ag.tanh(ys)) + ag.sum(weights * weights) + ag.sum(final * final)
    graph = ag.trace(loss, **inputs).grad(wrt=["h", "x", "m"])
    for a, b in zip(graph.compile(device.name)(**inputs), graph.compile("cpu")(**inputs)):
        np.testing.assert_allclose(a, b, rtol=2e-6, atol=2e-6)


class SequenceSum(ag.nn.Module):
    """A GRU encoder and a linear readout of its final state."""

    def __init__(self):
        super().__init__()
        self.encoder, self.readout = ag.nn.GRU(2, 8), ag.nn.Linear(8, 1)

    def forward(self, x):
        states, final = self.encoder(x)
        return self.readout(final)


def test_the_trainer_trains_a_gru_encoder():
    """Regression of half the sum of the first feature over time: the loss falls within 30 Adam steps."""
    def batches(rng):
        x = rng.standard_normal((16, 5, 2)).astype(np.float32)
        return dict(x=x, y=0.5 * x[..., :1].sum(1))

    def squared_error(model, x, y):
        error = model(x) - y
        return {"loss": ag.mean(error * error)}
    model = SequenceSum()
    assert sum(node.op == "scan" for node in ag.trace(model, x=ag.Input(("B", "T", 2))).nodes) == 1
    history = Trainer(model, squared_error, Adam(model, lr=0.03), progress=False).fit(batches, steps=30)
    curve = [record["loss"] for record in history if record["kind"] == "train"]
    assert len(curve) == 30 and np.mean(curve[-5:]) < 0.3 * np.mean(curve[:5])
