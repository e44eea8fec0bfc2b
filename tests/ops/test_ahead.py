"""ops/cpu/ahead.py: costly kernels compiled in a helper process, loaded here from numba's cache."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from ops.cpu import ahead, softmax

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_a_job_is_a_costly_op_with_literal_attributes():
    x = [((4, 8), np.dtype(np.float32))]
    assert ahead.job("softmax", {"causal": False}, x) == ("softmax", (("causal", False),), (((4, 8), "float32"),))
    assert ahead.job("exp", {}, x) is None                                  # not costly
    assert ahead.job("softmax", {"causal": False}, [((4, 8), np.dtype(np.float16))]) is None
    assert ahead.job("softmax", {"causal": np.bool_(False)}, x) is None     # not a plain literal
    assert ahead.job("layer_norm", {"eps": float("inf")}, x) is None         # repr writes no literal
    assert ahead.job("softmax", {"causal": False}, [((np.int64(4), 8), np.dtype(np.float32))]) is None
    program = ((("add", 0, 1),), ("x",))
    assert ahead.job("fused", {"program": program, "scale": -0.0}, x)[1] == (("program", program), ("scale", -0.0))


def test_no_helper_for_kernels_compiled_already():
    x = np.ones((13, 7), np.float32)
    softmax.softmax(x)                      # compiled (or loaded) here
    job = ahead.job("softmax", {"causal": False}, [(x.shape, x.dtype)])
    assert not ahead._cold(job)
    assert ahead.start([job, None]) == [None, None]


def test_kin_go_after_the_others_each_family_together_first_first():
    spec = {op: (op, (), ()) for op in ("gather", "attention", "cross_entropy", "softmax", "cross_entropy_grad",
                                          "attention_grad", "scatter_add", "layer_norm")}
    last_first = [spec[op] for op in ("scatter_add", "attention_grad", "cross_entropy_grad", "softmax",
                                      "cross_entropy", "attention", "gather")]
    assert ahead._kin_last(last_first) == [spec[op] for op in (
        "scatter_add", "cross_entropy_grad", "softmax", "cross_entropy", "gather", "attention", "attention_grad")]
    alone = [spec["layer_norm"], spec["attention"], spec["gather"]]          # one of a family stays in its place
    assert ahead._kin_last(alone) == alone


@pytest.mark.parametrize("momentum", [0.0, 0.9])
@pytest.mark.parametrize("rule", ["sgd", "adam", "adamw"])
def test_an_optimizers_job_compiles_the_specialization_its_update_calls(rule, momentum, monkeypatch):
    """The job an optimizer expects (its ``update_kernel``) must be callable as written: the helper swallows a
    kernel's errors, so a wrong one would compile nothing, silently. SGD without momentum passes an empty buffer,
    one specialization with the job's."""
    from attngraph.core.parameter import Parameter
    from attngraph.train.optim import SGD, Adam, AdamW
    monkeypatch.setattr(ahead, "_expected", [])
    weight = Parameter(np.ones(3, np.float32))
    optimizer = {"sgd": lambda: SGD([weight], lr=0.1, momentum=momentum), "adam": lambda: Adam([weight]),
                 "adamw": lambda: AdamW([weight])}[rule]()
    [job] = ahead._expected
    assert job[0] == rule
    ahead.compile_job(job)
    [dispatcher] = ahead.COSTLY[rule]({}, ("float32",))
    compiled = set(dispatcher.signatures)
    optimizer.step([np.full(3, 0.5, np.float32)])
    assert set(dispatcher.signatures) == compiled and any(str(sig[0].dtype) == "float32" for sig in compiled)


def test_no_helper_when_turned_off(monkeypatch):
    monkeypatch.setenv("ATTNGRAPH_COMPILE_AHEAD", "0")
    assert not ahead._can_help()


SCRIPT = textwrap.dedent("""
    import time
    import numpy as np
    import attngraph as ag
    from ops.cpu import ahead, cross_entropy, embedding, gelu, layer_norm

    rng = np.random.default_rng(0)
    x = rng.standard_normal((6, 5)).astype(np.float32)
    # a job given to a helper, then run here once the helper is done: loaded from the cache, not compiled
    job = ahead.job("layer_norm_grad", {"eps": 1e-5}, [((6, 5), x.dtype), ((6, 5), x.dtype), ((5,), x.dtype)])
    def finish(helper):
        deadline = time.monotonic() + 120
        while not helper.finished and time.monotonic() < deadline:
            time.sleep(0.05)

    [(helper, number)] = ahead.start([job])
    finish(helper)
    assert number in helper.done, (helper.started, helper.done)
    dx = helper.then(number, layer_norm.layer_norm_backward, x, x, np.ones(5, np.float32))
    stats = layer_norm._layer_norm_backward_rows.serial.stats
    assert sum(stats.cache_hits.values()) == 1 and not stats.cache_misses, stats
    x64 = x.astype(np.float64)
    centered = x64 - x64.mean(-1, keepdims=True)
    rstd = 1 / np.sqrt((centered ** 2).mean(-1, keepdims=True) + 1e-5)
    xhat = centered * rstd
    expected = rstd * (x64 - x64.mean(-1, keepdims=True) - xhat * (x64 * xhat).mean(-1, keepdims=True))
    assert np.allclose(dx, expected, atol=1e-5)

    # the helper takes the later job first and skips one this process took before it started it
    first, second = (ahead.job(op, {"causal": False}, [((3, 4), x.dtype)]) for op in ("softmax", "log_softmax"))
    [(helper, taken), (_, later)] = ahead.start([first, second])
    assert later < taken
    helper.then(taken, lambda: None)
    finish(helper)
    assert taken not in helper.started and later in helper.done, (helper.started, helper.done)
    deadline = time.monotonic() + 60          # a helper that is done and gone leaves no pipe open
    while helper.process.returncode is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert helper.process.stdin.closed and helper.process.stdout.closed

    # a job this process takes before the helper starts it brings its kin: they compile here, the helper skips them
    ahead.KIN.update(gather="embedding", scatter_add="embedding")      # a family for this test
    rows, index = ((8, 3), x.dtype), ((4,), np.dtype(np.int64))
    jobs = [ahead.job("gather", {}, [rows, index]),
            ahead.job("scatter_add", {"num_rows": 8}, [((4, 3), x.dtype), index])]
    [(helper, gather), (_, scatter)] = ahead.start(jobs)
    assert helper.jobs == jobs                              # kin last, first first
    helper.then(gather, lambda: None)
    finish(helper)
    assert not helper.started & {gather, scatter}, helper.started
    assert embedding._scatter_add_rows.serial.signatures or embedding._scatter_add_rows.parallel.signatures

    # while it waits for a job the helper is compiling, this process compiles the helper's last jobs, taken from it
    x_spec = ((6, 5), x.dtype)
    jobs = [ahead.job("gelu", {"approximate": "tanh"}, [x_spec]),
            ahead.job("gelu_grad", {"approximate": "tanh"}, [x_spec, x_spec]),
            ahead.job("log_softmax_grad", {"causal": False}, [x_spec, x_spec])]
    [(helper, forward), _, (_, first)] = ahead.start(jobs)
    deadline = time.monotonic() + 120
    while first not in helper.started and not helper.finished and time.monotonic() < deadline:
        time.sleep(0.01)
    helper.then(first, lambda: None)
    assert forward in helper.taken and forward not in helper.started, (helper.taken, helper.started)
    assert gelu._forward.serial.signatures or gelu._forward.parallel.signatures
    finish(helper)

    # an executable hands its costly ops to a helper at its first run; its results do not depend on who compiled
    targets = rng.integers(0, 5, 6)
    graph = ag.trace(lambda x, t: ag.cross_entropy(x * 2.0, t), x=x, t=targets)
    step = graph.grad(wrt=["x"]).compile()
    loss, grad = step(x=x, t=targets)
    given = {job[0] for job in ahead._given}
    assert {"cross_entropy", "cross_entropy_grad", "fused"} <= given, given
    p = np.exp(2 * x64 - (2 * x64).max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    assert np.isclose(loss, -np.log(p[np.arange(6), targets]).mean(), atol=1e-6)
    p[np.arange(6), targets] -= 1
    assert np.allclose(grad, 2 * p / 6, atol=1e-6)
    for helper in step._helpers.copy():         # once its helpers are done, the step no longer calls through them
        finish(helper)
    assert np.array_equal(step(x=x, t=targets)[1], grad) and not step._helpers

    # an optimizer's update and the norm, which follow the step, go first to the next helper, and load from the cache
    from attngraph.core.parameter import Parameter
    from attngraph.train.optim import AdamW, compile_ahead
    from ops.cpu import optim
    weights = [Parameter(np.ones(3))]
    AdamW(weights)
    compile_ahead("sum_of_squares", 1, {}, weights)
    [(helper, _)] = ahead.start([ahead.job("softmax", {"causal": True}, [((3, 4), np.dtype(np.float64))])])
    assert [job[0] for job in helper.jobs] == ["adamw", "sum_of_squares", "softmax"], helper.jobs
    assert [job[2] for job in helper.jobs[:2]] == [(((1,), "float64"),) * 4, (((1,), "float64"),)]
    finish(helper)
    assert helper.done == {0, 1, 2}, helper.done
    p, g, m, v = np.ones(3), np.full(3, 0.5), np.zeros(3), np.zeros(3)
    optim.adamw(p, g, m, v, lr=0.1, step=1, weight_decay=0.0)
    assert np.allclose(p, 0.9) and np.allclose(m, 0.05) and np.isclose(optim.sum_of_squares(g), 0.75)
    for kernel in (optim._adam, optim._sum_of_squares):
        assert sum(kernel.stats.cache_hits.values()) == 1 and not kernel.stats.cache_misses, kernel.stats
    assert not ahead._expected
    print("ok")
""")


@pytest.mark.skipif(not ahead._can_help(), reason="one core: no helper")
def test_a_helper_compiles_into_the_cache_this_process_loads(tmp_path):
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba"), "ATTNGRAPH_KERNELS": str(tmp_path / "fused"),
           "PYTHONPATH": ROOT}
    run = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stdout + run.stderr
