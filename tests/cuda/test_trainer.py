"""``Trainer(device="cuda")``: the CPU's run, with the parameters, gradients and optimizer state on the device.

The model is the training tests' regression MLP with dropout, shrunk (4-4-1, batches of 4) so that a simulated
step takes a fraction of a second; AdamW with clipping and two micro-batches per step exercises every
device-side piece: accumulation, the global norm, the scaled update.
"""
import numpy as np
import pytest

from attngraph.nn import MLP, init
from attngraph.train import AdamW, Trainer
from ops import _cuda
from tests.train.conftest import regression_batches, squared_error

STEPS = 3


def batches(rng):
    return regression_batches(rng, size=4)


def trainer(device, model_seed=0, **options):
    init.manual_seed(model_seed)
    model = MLP([4, 4, 1], dropout=0.2)
    return Trainer(model, squared_error, AdamW(model, lr=0.01), clip=0.5, accumulate=2, seed=3, device=device,
                   progress=False, **options)


def records(history, *keys):
    return np.array([[r[k] for k in keys] for r in history if r["kind"] == "train"])


def assert_on_the_device(trainer):
    assert all(p.device == "cuda" for p in trainer.model.parameters())
    assert all(_cuda.is_device_array(a) for arrays in trainer.optimizer.state.values() for a in arrays)


def test_a_cuda_run_repeats_the_cpu_run_with_everything_on_the_device():
    cpu = trainer("cpu")
    want = cpu.fit(batches, steps=STEPS)
    cuda = trainer("cuda", callbacks=[lambda t, record: assert_on_the_device(t)])
    got = cuda.fit(batches, steps=STEPS)
    assert_on_the_device(cuda)
    keys = ("loss", "grad_norm", "mean_abs_error")
    np.testing.assert_allclose(records(got, *keys), records(want, *keys), rtol=1e-5)
    assert records(got, "grad_norm").max() > 0.5          # the clipping changed every step
    for (name, p), q in zip(cpu.model.named_parameters(), cuda.model.parameters()):
        np.testing.assert_allclose(q.numpy(), p.data, rtol=1e-5, atol=1e-7, err_msg=name)
    for key, value in cpu.optimizer.state_dict().items():
        np.testing.assert_allclose(cuda.optimizer.state_dict()[key], value, rtol=1e-5, atol=1e-9, err_msg=key)


def test_a_cuda_checkpoint_restores_exactly_and_the_resumed_run_repeats_the_uninterrupted_one(tmp_path):
    uninterrupted = trainer("cuda", checkpoint_every=2, checkpoint_path=tmp_path / "last")
    curve = records(uninterrupted.fit(batches, steps=STEPS), "loss", "grad_norm")
    saved = np.load(tmp_path / "last.npz")
    resumed = trainer("cuda", model_seed=99)
    assert resumed.load(tmp_path / "last")["step"] == 2 and resumed.step == 2
    assert_on_the_device(resumed)
    for name, p in resumed.model.named_parameters():
        np.testing.assert_array_equal(p.numpy(), saved[f"param/{name}"], err_msg=name)
    for key, value in resumed.optimizer.state_dict().items():
        np.testing.assert_array_equal(value, saved[f"optim/{key}"], err_msg=key)
    np.testing.assert_array_equal(records(resumed.fit(batches, steps=STEPS), "loss", "grad_norm"), curve[2:])
    assert_on_the_device(resumed)
    for p, q in zip(resumed.model.parameters(), uninterrupted.model.parameters()):
        np.testing.assert_array_equal(p.numpy(), q.numpy())


def test_a_host_gradient_for_a_parameter_on_the_device_is_refused():
    model = trainer("cuda").model
    optimizer = AdamW(model)
    grads = [np.ones(p.shape, np.float32) for p in model.parameters()]
    with pytest.raises(ValueError, match="gradient of parameter '0.weight' is on 'cpu' but the parameter is on 'cuda'"):
        optimizer.step(grads)
    assert optimizer.steps == 0
