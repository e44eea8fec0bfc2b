"""rms_norm, group_norm and batch_norm against their float64 NumPy formulas on every device (values in float32 and
float64, gradients against central differences, gradcheck on the CPU), the arguments refused while tracing, and the
modules RMSNorm, GroupNorm and BatchNorm1d/2d: BatchNorm's running statistics are buffers, in state_dict and
checkpoints but not parameters, moved by every run of a training-mode graph (the Trainer's included) and used in
eval mode."""
import numpy as np
import pytest

import attngraph as ag
from attngraph.errors import ShapeError
from attngraph.inspect.gradcheck import gradcheck
from attngraph.train import checkpoint
from attngraph.train.optim import SGD
from attngraph.train.trainer import Trainer
from tests.conftest import run, value_and_grad_on
from tests.ops.conftest import numeric_grad  # noqa: F401  (a fixture)

GAMMA, BETA = np.array([0.5, -1.0, 2.0, 1.5]), np.array([0.1, 0.0, -0.3, 1.0])


def normalized(x, axes, eps):
    return (x - x.mean(axes, keepdims=True)) / np.sqrt(x.var(axes, keepdims=True) + eps)


def group_norm(x, groups, eps=1e-5):
    n, c = x.shape[:2]
    y = normalized(x.reshape(n, groups, -1), -1, eps).reshape(x.shape)
    return y * GAMMA.reshape(4, 1, 1) + BETA.reshape(4, 1, 1)


# name: (attngraph's function of x (2, 4, 3, 2), its float64 reference)
NORMS = {
    "rms_norm": (lambda x: ag.rms_norm(x, (3, 2), np.linspace(0.5, 2, 6).reshape(3, 2), 1e-6),
                 lambda x: x / np.sqrt((x * x).mean((2, 3), keepdims=True) + 1e-6) * np.linspace(0.5, 2, 6).reshape(3, 2)),
    "group_norm": (lambda x: ag.group_norm(x, 2, GAMMA, BETA), lambda x: group_norm(x, 2)),
    "batch_norm": (lambda x: ag.batch_norm(x, None, None, GAMMA, BETA, training=True),
                   lambda x: normalized(x, (0, 2, 3), 1e-5) * GAMMA.reshape(4, 1, 1) + BETA.reshape(4, 1, 1)),
}
COVERS = set(NORMS)


def sample(dtype=np.float64, shape=(2, 4, 3, 2)):
    return np.random.default_rng(7).normal(1.0, 2.0, shape).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", NORMS)
def test_values_are_the_formula(name, dtype, device):
    fn, ref = NORMS[name]
    fn = {"rms_norm": lambda x: ag.rms_norm(x, (3, 2), np.linspace(0.5, 2, 6).reshape(3, 2).astype(dtype), 1e-6),
          "group_norm": lambda x: ag.group_norm(x, 2, GAMMA.astype(dtype), BETA.astype(dtype)),
          "batch_norm": lambda x: ag.batch_norm(x, None, None, GAMMA.astype(dtype), BETA.astype(dtype), True)}[name]
    got = run(fn, sample(dtype), device=device)
    assert got.dtype == dtype
    np.testing.assert_allclose(got, ref(sample()), rtol=1e-11 if dtype == np.float64 else 2e-5, atol=1e-5)


@pytest.mark.parametrize("name", NORMS)
def test_gradients_are_the_formula_s_slope(name, device, numeric_grad):
    fn, ref = NORMS[name]
    x, weights = sample(), np.linspace(-1, 1, 48).reshape(2, 4, 3, 2)
    _, (grad,) = value_and_grad_on(device, lambda x: ag.sum(fn(x) * weights), x)
    np.testing.assert_allclose(grad, numeric_grad(lambda x: (ref(x) * weights).sum(), x), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("name", NORMS)
def test_gradcheck_in_float64(name):
    fn, _ = NORMS[name]
    gradcheck(lambda x: ag.sum(ag.tanh(fn(x))), sample()).raise_if_failed()


def test_rms_norm_s_default_eps_is_the_dtype_s_epsilon_as_torch():
    x = np.array([[1e-4, -2e-4]], np.float32)
    want = x / np.sqrt((x.astype(np.float64) ** 2).mean() + np.finfo(np.float32).eps)
    np.testing.assert_allclose(run(lambda x: ag.rms_norm(x, 2), x), want, rtol=1e-6)


def test_batch_norm_in_eval_mode_uses_the_running_statistics():
    x, mean, var = sample(), np.array([1.0, 0.0, -1.0, 2.0]), np.array([4.0, 1.0, 0.25, 2.0])
    got = run(lambda x, m, v: ag.batch_norm(x, m, v, GAMMA, BETA, eps=0.0), x, mean, var)
    np.testing.assert_allclose(got, (x - mean.reshape(4, 1, 1)) / np.sqrt(var.reshape(4, 1, 1)) * GAMMA.reshape(
        4, 1, 1) + BETA.reshape(4, 1, 1), rtol=1e-13)


@pytest.mark.parametrize("build, message", [
    (lambda x: ag.rms_norm(x, (4,)), "must end the input's shape"),
    (lambda x: ag.rms_norm(x, 2, np.ones(3)), "weight must have the normalized shape"),
    (lambda x: ag.rms_norm(x, 2, eps=-1.0), "eps must be a finite number"),
    (lambda x: ag.group_norm(x, 3), "must be a positive int dividing the 4 channels"),
    (lambda x: ag.group_norm(x, 2, np.ones(3)), r"weight must have shape \(4,\)"),
    (lambda x: ag.group_norm(x[0, 0, 0], 1), r"takes an input \(N, C, ...\)"),
    (lambda x: ag.batch_norm(x, None, None), "needs running_mean and running_var"),
    (lambda x: ag.batch_norm(x, np.zeros(3), np.ones(4)), r"running_mean must have shape \(4,\)"),
    (lambda x: ag.batch_norm(x, None, None, training=True, momentum=2), "momentum must be"),
])
def test_bad_arguments_raise_while_tracing(build, message):
    with pytest.raises(ShapeError, match=message):
        ag.trace(build, x=ag.Input((2, 4, 3, 2)))


def test_modules_match_the_functions():
    x = sample(np.float32, (2, 4, 3))
    group = ag.nn.GroupNorm(2, 4)
    np.testing.assert_allclose(ag.trace(group, x=x).compile()(x=x), run(lambda x: ag.group_norm(x, 2), x), rtol=1e-6)
    rms = ag.nn.RMSNorm(3, eps=1e-6)
    np.testing.assert_allclose(ag.trace(rms, x=x).compile()(x=x), run(lambda x: ag.rms_norm(x, 3, eps=1e-6), x))
    with pytest.raises(ShapeError, match=r"BatchNorm2d takes \(N, C, H, W\)"):
        ag.trace(ag.nn.BatchNorm2d(4), x=x)


def test_running_statistics_are_buffers_not_parameters():
    norm = ag.nn.BatchNorm2d(4)
    assert [name for name, _ in norm.named_parameters()] == ["weight", "bias"]
    assert sorted(norm.state_dict()) == ["bias", "running_mean", "running_var", "weight"]
    assert [name for name, _ in ag.nn.Sequential(norm).named_buffers()] == ["0.running_mean", "0.running_var"]


def test_each_training_run_moves_the_running_statistics_as_torch_and_eval_uses_them():
    """torch.nn.BatchNorm1d(3) on this batch, once in train mode: running_mean = 0.1·mean, running_var = 0.9 +
    0.1·the unbiased variance; the output uses the batch's biased variance."""
    norm, x = ag.nn.BatchNorm1d(3, dtype="float64"), sample(np.float64, (5, 3))
    train = ag.trace(norm, x=x).compile()
    y = train(x=x)
    np.testing.assert_allclose(y, normalized(x, 0, 1e-5), rtol=1e-12)
    np.testing.assert_allclose(norm.running_mean.data, 0.1 * x.mean(0), rtol=1e-14)
    np.testing.assert_allclose(norm.running_var.data, 0.9 + 0.1 * x.var(0, ddof=1), rtol=1e-14)
    train(x=x)
    np.testing.assert_allclose(norm.running_mean.data, 0.19 * x.mean(0), rtol=1e-14)
    evaluation = ag.trace(norm.eval(), x=x)
    assert not any(name.startswith("update:") for name in evaluation.output_names)
    np.testing.assert_allclose(evaluation.compile()(x=x), (x - norm.running_mean.data) / np.sqrt(
        norm.running_var.data + 1e-5), rtol=1e-12)


def test_value_and_grad_returns_the_loss_and_gradients_and_writes_the_buffers_back():
    norm, x = ag.nn.BatchNorm1d(3, dtype="float64"), sample(np.float64, (5, 3))
    loss, grad = ag.value_and_grad(lambda x: ag.sum(norm(x) * np.arange(3.0)))(x)
    assert grad.shape == x.shape and np.isfinite(loss)
    np.testing.assert_allclose(norm.running_mean.data, 0.1 * x.mean(0), rtol=1e-14)


class Regressor(ag.Module):
    def __init__(self):
        super().__init__()
        self.norm = ag.nn.BatchNorm1d(2, momentum=0.2)
        self.linear = ag.nn.Linear(2, 1)

    def forward(self, x):
        return self.linear(self.norm(x))


def test_a_trainer_run_moves_the_running_mean_to_the_data_s_and_checkpoints_keep_it(tmp_path):
    model, mean, scale = Regressor(), np.array([3.0, -2.0]), np.array([0.5, 2.0])

    def batches(rng):
        x = (rng.standard_normal((32, 2)) * scale + mean).astype(np.float32)
        return {"x": x, "y": x[:, :1] - x[:, 1:]}
    trainer = Trainer(model, lambda m, x, y: ag.mean((m(x) - y) * (m(x) - y)), SGD(model.parameters(), 0.05),
                      progress=False)
    trainer.fit(batches, 40)
    np.testing.assert_allclose(model.norm.running_mean.data, mean, atol=0.15)
    np.testing.assert_allclose(model.norm.running_var.data, scale ** 2, rtol=0.3)
    x = batches(np.random.default_rng(1))["x"][:4]
    train_out = ag.trace(model, x=x).compile()(x=x)
    eval_out = ag.trace(model.eval(), x=x).compile()(x=x)
    assert not np.allclose(train_out, eval_out)

    path = checkpoint.save(tmp_path / "bn", model)
    saved = model.state_dict()
    model.norm.running_mean.assign(np.zeros(2, np.float32))
    checkpoint.load(path, model)
    np.testing.assert_array_equal(model.norm.running_mean.data, saved["norm.running_mean"])
    np.testing.assert_array_equal(ag.trace(model, x=x).compile()(x=x), eval_out)
