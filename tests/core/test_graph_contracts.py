"""The contracts of graphs and executables under hostile use: outputs never alias the model, the inputs or the
executable's constants; unsupported dtypes and clashing names are refused while tracing; a parameter changed
after compiling is named when the graph runs; dropout masks are distinct per call across threads and
executables; debug mode is per thread."""
import dataclasses
import os
import subprocess
import sys
import threading

import numpy as np
import pytest
from numba import njit

import attngraph as ag
import ops
from attngraph.core.primitive import REGISTRY, define
from attngraph.core.functional import emit

X = np.arange(6, dtype=np.float32).reshape(2, 3)
UNSUPPORTED = pytest.mark.parametrize("dtype", [np.longdouble, np.complex64, np.complex128, object,
                                                "datetime64[s]", "timedelta64[s]", "U3", "S3"])


def parameter():
    return ag.Parameter(np.arange(6, dtype=np.float32).reshape(2, 3) + 10, name="w")


def as_tuple(outputs) -> tuple:
    return outputs if isinstance(outputs, tuple) else (outputs,)


# --- outputs are the caller's ------------------------------------------------------------------------------

ALIASING = {                # an output that is, or views, what the executable does not own
    "parameter": lambda x, w: w,
    "parameter reshaped": lambda x, w: ag.reshape(w, (3, 2)),
    "parameter row": lambda x, w: w[1],
    "parameter transposed": lambda x, w: ag.transpose(w),
    "parameter stop_gradient": lambda x, w: ag.stop_gradient(w),
    "parameter and a gradient": lambda x, w: (w, x * 2),
    "input": lambda x, w: x,
    "input reshaped": lambda x, w: ag.reshape(x, (6,)),
    "input rows": lambda x, w: x[1:],
    "input times one": lambda x, w: x * 1.0,            # simplified away: the output is the input
    "constant": lambda x, w: ag.reshape(np.full((2, 3), 5, np.float32), (3, 2)),
}


@pytest.mark.parametrize("name", ALIASING)
def test_writing_into_an_output_changes_neither_the_model_nor_the_executable(name):
    w = parameter()
    run = ag.trace(lambda x: ALIASING[name](x, w), x=X).compile()
    x = X.copy()
    first = as_tuple(run(x=x))
    expected = [out.copy() for out in first]
    for out in first:
        out[...] = -1
    np.testing.assert_array_equal(w.data, parameter().data)
    np.testing.assert_array_equal(x, X)
    for out, want in zip(as_tuple(run(x=x)), expected):
        np.testing.assert_array_equal(out, want)


def with_cpu_kernel(monkeypatch, name: str, kernel) -> None:
    """The CPU backend, for this test, with ``kernel`` for primitive ``name``."""
    cpu = ops.get_backend("cpu")
    monkeypatch.setitem(ops.BACKENDS, "cpu", dataclasses.replace(cpu, kernels={**cpu.kernels, name: kernel}))


def test_a_view_returned_by_a_numba_kernel_is_copied_too(monkeypatch):
    define("numba_flat_view", lambda x: ((6,), x.dtype), differentiable=False)
    with_cpu_kernel(monkeypatch, "numba_flat_view", njit(lambda x: x.reshape(-1)))
    try:
        w = parameter()
        out = ag.trace(lambda: emit("numba_flat_view", w)).compile()()
        out[:] = 0
        np.testing.assert_array_equal(w.data, parameter().data)
    finally:
        del REGISTRY["numba_flat_view"]


def test_an_output_the_kernel_allocated_is_returned_without_a_copy(monkeypatch):
    made = []

    def kernel(x):
        made.append(x * 3)
        return made[-1]

    define("recorded_triple", lambda x: (x.shape, x.dtype), differentiable=False)
    with_cpu_kernel(monkeypatch, "recorded_triple", kernel)
    try:
        out = ag.trace(lambda x: emit("recorded_triple", x), x=X).compile()(x=X)
        assert out is made[-1]
        np.testing.assert_array_equal(out, 3 * X)
    finally:
        del REGISTRY["recorded_triple"]


def test_a_gradient_folded_into_a_constant_is_returned_as_a_copy():
    run = ag.trace(lambda x: ag.sum(x * 2.0), x=X).grad(wrt=["x"]).compile()     # d/dx is the constant 2
    _, dx = run(x=X)
    dx *= 0                     # as an optimizer scaling its gradients in place might
    np.testing.assert_array_equal(run(x=X)[1], np.full_like(X, 2))


# --- dtypes ------------------------------------------------------------------------------------------------

@UNSUPPORTED
def test_an_input_spec_of_an_unsupported_dtype_is_refused_naming_the_supported_ones(dtype):
    with pytest.raises(ag.DTypeError, match=r"does not compute in; use one of float32, float64, float16, bool, int8"):
        ag.Input((2, 3), dtype)


@UNSUPPORTED
def test_an_example_array_of_an_unsupported_dtype_is_refused_while_tracing(dtype):
    with pytest.raises(ag.DTypeError, match=r"Input 'x' has dtype .*float32, float64"):
        ag.trace(lambda x: x, x=np.zeros((2, 3), dtype))


@pytest.mark.parametrize("dtype", [np.longdouble])         # float16: tests/ops/test_dtypes.py
def test_value_and_grad_refuses_a_float_dtype_it_cannot_compute_in(dtype):
    with pytest.raises(ag.DTypeError, match=r"Input 'arg0' has dtype float128.*float32, float64"):
        ag.value_and_grad(lambda x: ag.sum(x * x))(np.ones(3, dtype))


@pytest.mark.parametrize("dtype", [np.complex64, np.int64, np.bool_])
def test_value_and_grad_refuses_to_differentiate_a_non_float_argument(dtype):
    with pytest.raises(ag.DTypeError, match="only floating-point arguments can be differentiated"):
        ag.value_and_grad(lambda x: ag.sum(x))(np.ones(3, dtype))


def test_an_unknown_dtype_name_is_a_dtype_error():
    with pytest.raises(ag.DTypeError, match="flaot32"):
        ag.Input((3,), "flaot32")


@pytest.mark.parametrize("make", [lambda x: x + np.ones(3, np.complex64), lambda x: x.astype("complex64")],
                         ids=["complex constant", "astype complex64"])
def test_a_node_of_an_unsupported_dtype_made_inside_the_trace_is_refused(make):
    with pytest.raises(ag.DTypeError, match="float32, float64"):
        ag.trace(make, x=ag.Input((3,)))


@pytest.mark.parametrize("dtype", [np.longdouble, np.int64, np.complex64])
def test_a_parameter_holds_float32_float64_or_float16_only(dtype):
    with pytest.raises(ag.DTypeError, match="use one of float32, float64"):
        ag.Parameter(np.zeros(3, dtype))
    w = parameter()
    with pytest.raises(ag.DTypeError, match="parameter 'w' has dtype"):
        w.data = np.zeros((2, 3), dtype)
    np.testing.assert_array_equal(w.data, parameter().data)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8])
def test_integer_indices_of_any_width_still_work(dtype):
    emb = ag.nn.Embedding(5, 2)
    tokens = np.array([[4, 0, 2]], dtype)
    out = ag.trace(emb, indices=ag.Input((1, 3), dtype)).compile()(indices=tokens)
    np.testing.assert_array_equal(out, emb.weight.data[[4, 0, 2]][None])


def test_boolean_masks_still_work():
    mask = np.array([[True, False, True]])
    out = ag.trace(lambda x, m: ag.softmax(x, mask=m), x=ag.Input((1, 3)), m=ag.Input((1, 3), "bool")).compile()(
        x=np.zeros((1, 3), np.float32), m=mask)
    np.testing.assert_allclose(out, [[0.5, 0, 0.5]])


# --- names -------------------------------------------------------------------------------------------------

def test_two_inputs_with_one_name_are_refused():
    with pytest.raises(ag.TracingError, match="'x' already names .*; inputs and parameters need distinct names"):
        ag.trace(lambda a, b: a + b, a=ag.Input((3,), name="x"), b=ag.Input((3,), name="x"))


@pytest.mark.parametrize("dropout", [0.5, 0.0], ids=["with dropout", "without"])
@pytest.mark.parametrize("spec", [dict(rng_seed=ag.Input((3,))), dict(s=ag.Input((), "int64", name="rng_seed"))],
                         ids=["keyword", "Input name"])
def test_the_name_rng_seed_is_reserved(spec, dropout):
    with pytest.raises(ag.TracingError, match="'rng_seed' is reserved for the seed of dropout masks"):
        ag.trace(lambda x, **rest: ag.dropout(x, dropout), x=ag.Input((3,)), **spec)


def test_an_input_named_like_a_parameter_of_the_traced_module_is_refused():
    with pytest.raises(ag.TracingError, match=r"parameter 'weight'.*'weight' already names node n\d+ \(input"):
        ag.trace(lambda weight: ag.nn.Linear(3, 2)(weight), weight=ag.Input((1, 3)))


def test_a_parameter_outside_the_module_is_numbered_away_from_an_input_name():
    w = ag.Parameter(np.ones(3, np.float32), name="x")
    graph = ag.trace(lambda x: x * w, x=ag.Input((3,)))
    assert list(graph.inputs) == ["x"] and list(graph.parameters) == ["x_1"]
    run = ag.trace(lambda x: ag.sum(x * w), x=ag.Input((3,))).grad(wrt=["x", "x_1"]).compile()
    _, dx, dw = run(x=np.full(3, 2, np.float32))
    np.testing.assert_array_equal(dx, [1, 1, 1])
    np.testing.assert_array_equal(dw, [2, 2, 2])


def test_an_output_named_like_a_gradient_says_which_to_rename():
    graph = ag.trace(lambda x: {"loss": ag.sum(x * x), "grad:x": x}, x=ag.Input((3,)))
    with pytest.raises(ag.TracingError, match="two outputs are named 'grad:x': rename one"):
        graph.grad(wrt=["x"])


# --- parameters changed after compiling --------------------------------------------------------------------

@pytest.mark.parametrize("change, error, message", [
    (lambda lin: setattr(lin.weight, "data", np.zeros((2, 3), np.float32)), ag.ShapeError, r"now \(2, 3\) float32"),
    (lambda lin: lin.weight.assign(np.zeros((3, 2), np.float64)), ag.DTypeError, r"now \(3, 2\) float64"),
    (lambda lin: lin.astype(np.float64), ag.DTypeError, "float64, but the graph was traced with"),
    (lambda lin: lin.bias.assign(np.zeros(5, np.float32)), ag.ShapeError, r"'bias' is now \(5,\)"),
], ids=["shape", "dtype", "module astype", "bias shape"])
def test_a_parameter_changed_after_compiling_is_named_when_the_graph_runs(change, error, message):
    lin = ag.nn.Linear(3, 2)
    run = ag.trace(lin, x=ag.Input(("B", 3))).compile()
    x = np.ones((4, 3), np.float32)
    expected = run(x=x)
    saved = {name: p.numpy() for name, p in lin.named_parameters()}
    change(lin)
    with pytest.raises(error, match=message + ".*trace and compile again"):
        run(x=x)
    for name, p in lin.named_parameters():
        p.assign(saved[name])
    np.testing.assert_array_equal(run(x=x), expected)


def test_load_state_dict_with_other_shapes_leaves_the_compiled_graph_working():
    lin = ag.nn.Linear(3, 2)
    run = ag.trace(lin, x=ag.Input((1, 3))).compile()
    x = np.ones((1, 3), np.float32)
    expected = run(x=x)
    with pytest.raises(ag.CheckpointError):
        lin.load_state_dict({"weight": np.zeros((4, 4), np.float32), "bias": np.zeros(4, np.float32)})
    np.testing.assert_array_equal(run(x=x), expected)


# --- randomness per call -----------------------------------------------------------------------------------

ONES = np.ones((32, 32), np.float32)


def dropout_graph():
    return ag.trace(lambda x: ag.dropout(x, 0.5), x=ONES)


def mask(out) -> bytes:
    return (out != 0).tobytes()


@pytest.mark.parametrize("threads", [2, 4])
def test_threads_sharing_an_executable_draw_distinct_masks(threads):
    run = dropout_graph().compile(seed=11)
    masks, calls = [], 40
    start = threading.Barrier(threads)

    def work():
        start.wait()
        masks.extend(mask(run(x=ONES)) for _ in range(calls))

    workers = [threading.Thread(target=work) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert run.calls == threads * calls
    alone = dropout_graph().compile(seed=11)          # the same seed, called in one thread: the same set of masks
    assert set(masks) == {mask(alone(x=ONES)) for _ in range(threads * calls)}
    assert len(set(masks)) == threads * calls


def test_executables_made_without_a_seed_do_not_repeat_each_others_masks():
    graph = dropout_graph()
    first, second = graph.compile(), graph.compile()
    masks = [mask(run(x=ONES)) for run in (first, second, first, second)]
    assert len(set(masks)) == 4
    assert first.seed != second.seed


def test_value_and_grad_draws_other_masks_for_another_input_signature():
    f = ag.value_and_grad(lambda x: ag.sum(ag.dropout(x, 0.5)))
    _, small = f(np.ones(64, np.float32))
    _, large = f(np.ones(128, np.float32))
    assert not np.array_equal(small != 0, large[:64] != 0)


def test_call_k_uses_the_documented_seed_and_the_same_seed_repeats_the_sequence():
    graph = dropout_graph()
    seeded = graph.compile(seed=5)
    draws = [seeded(x=ONES) for _ in range(3)]
    h = int(np.random.SeedSequence(5).generate_state(1, np.uint64)[0])
    for k, draw in enumerate(draws):
        rng_seed = np.asarray((h + k) % 2 ** 64, np.uint64).view(np.int64)
        np.testing.assert_array_equal(graph.compile()(x=ONES, rng_seed=rng_seed), draw)
    again = graph.compile(seed=5)
    for draw in draws:
        np.testing.assert_array_equal(again(x=ONES), draw)


# --- debug mode is per thread ------------------------------------------------------------------------------

def sqrt_graph():
    return ag.trace(lambda x: ag.sqrt(x), x=ag.Input((2,))).compile()


NEGATIVE = np.array([-1.0, 4.0], np.float32)
QUIET = pytest.mark.filterwarnings("ignore:invalid value encountered in sqrt:RuntimeWarning")


@QUIET
def test_debug_in_one_thread_leaves_another_thread_unchecked():
    run = sqrt_graph()
    inside, other, results = threading.Event(), threading.Event(), {}

    def checked():
        with ag.debug():
            inside.set()
            other.wait(10)
            try:
                run(x=NEGATIVE)
                results["checked"] = "no error"
            except ag.NonFiniteError:
                results["checked"] = "NonFiniteError"

    def unchecked():
        inside.wait(10)
        try:
            results["unchecked"] = np.isnan(run(x=NEGATIVE)).any()
        finally:
            other.set()

    workers = [threading.Thread(target=checked), threading.Thread(target=unchecked)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert results == {"checked": "NonFiniteError", "unchecked": True}


@QUIET
def test_debug_off_in_one_thread_leaves_another_thread_checked():
    run = sqrt_graph()
    done = threading.Event()

    def switched_off():
        with ag.debug(False):
            done.wait(10)

    worker = threading.Thread(target=switched_off)
    with ag.debug():
        worker.start()
        try:
            with pytest.raises(ag.NonFiniteError, match="sqrt"):
                run(x=NEGATIVE)
        finally:
            done.set()
            worker.join()


def test_the_environment_variable_turns_debug_on_in_every_thread():
    script = ("import threading, numpy as np, attngraph as ag\n"
              "run = ag.trace(lambda x: ag.sqrt(x), x=ag.Input((2,))).compile()\n"
              "errors = []\n"
              "def work():\n"
              "    try: run(x=np.array([-1.0, 4.0], np.float32))\n"
              "    except ag.NonFiniteError: errors.append(1)\n"
              "t = threading.Thread(target=work); t.start(); t.join()\n"
              "with ag.debug(False):\n"
              "    with np.errstate(invalid='ignore'): run(x=np.array([-1.0, 4.0], np.float32))\n"
              "print(len(errors))\n")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                            env={**os.environ, "ATTNGRAPH_DEBUG": "1"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "1"


@pytest.mark.parametrize("debugging", [False, True], ids=["fast", "debug"])
@pytest.mark.parametrize("bad", [5, -6, 100])
def test_an_index_fed_out_of_range_is_a_binding_error_naming_the_node(debugging, bad):
    table = np.arange(15, dtype=np.float32).reshape(5, 3)
    run = ag.trace(lambda t, i: t[i] * 2, t=table, i=np.array([0, 1])).compile()
    with ag.debug(debugging), pytest.raises(ag.BindingError, match=r"out of range .*gather.*indices fed"):
        run(t=table, i=np.array([0, bad]))
    np.testing.assert_array_equal(run(t=table, i=np.array([4, -5])), table[[4, 0]] * 2)


def test_a_sequence_longer_than_its_position_table_is_a_binding_error():
    positions = ag.attention.LearnedPositions(4, 3)
    run = ag.trace(positions, x=ag.Input((1, "T", 3))).compile()
    assert run(x=np.zeros((1, 4, 3), np.float32)).shape == (1, 4, 3)
    with pytest.raises(ag.BindingError, match="out of range .*position table"):
        run(x=np.zeros((1, 6, 3), np.float32))
