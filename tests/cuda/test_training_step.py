"""A whole training step of a tiny transformer on "cuda" gives the CPU's loss, gradients and update.

The update is SGD with momentum: Adam's first step divides each gradient by its own magnitude, which turns
the rounding noise of gradients that are zero in exact arithmetic (the key projection's bias) into full
steps of either sign."""
import numpy as np

import attngraph as ag
from attngraph.attention import MultiHeadAttention
from attngraph.nn import Embedding, LayerNorm, Linear
from ops.cpu import optim as cpu_optim
from ops.cuda import optim as cuda_optim
from tests.cuda.conftest import host, on_device

VOCAB, D, HEADS, B, T = 7, 8, 2, 2, 5


class TinyTransformer(ag.Module):
    def __init__(self, rng):
        super().__init__()
        self.embed = Embedding(VOCAB, D, rng=rng)
        self.attn = MultiHeadAttention(D, HEADS, dropout=0.1, rng=rng)
        self.norm = LayerNorm(D)
        self.head = Linear(D, VOCAB, rng=rng)

    def forward(self, tokens, padding):
        x = self.embed(tokens)
        x = self.norm(x + self.attn(x, x, x, mask=padding, causal=True))
        return self.head(x)


def test_loss_gradients_and_an_sgd_step_match_the_cpu(rng):
    model = TinyTransformer(rng)
    tokens = rng.integers(0, VOCAB, (B, T))
    targets = np.where(rng.random((B, T)) < 0.2, -1, rng.integers(0, VOCAB, (B, T)))
    padding = np.ones((B, T), bool)
    padding[1, 3:] = False

    def loss(tokens, padding, targets):
        return ag.cross_entropy(model(tokens, padding), targets, ignore_index=-1)
    graph = ag.trace(loss, tokens=ag.Input(("B", "T"), "int64"), padding=ag.Input(("B", "T"), "bool"),
                     targets=ag.Input(("B", "T"), "int64")).grad()
    batch = {"tokens": tokens, "padding": padding, "targets": targets}
    names = [name for name, _ in model.named_parameters()]

    step_cpu = graph.compile("cpu", seed=5)
    loss_cpu, *grads_cpu = step_cpu(**batch)
    model.to("cuda")
    step = graph.compile("cuda", seed=5)
    loss, *grads = step.run_on_device(**batch)
    np.testing.assert_allclose(host(loss), loss_cpu, rtol=1e-5)
    for name, got, want in zip(names, grads, grads_cpu):
        np.testing.assert_allclose(host(got), want, rtol=1e-4, atol=1e-6, err_msg=name)

    host_params = {name: p.numpy() for name, p in model.named_parameters()}
    for (name, p), g, g_cpu in zip(model.named_parameters(), grads, grads_cpu):
        cpu_optim.sgd(host_params[name], g_cpu, np.zeros_like(g_cpu), lr=0.1, momentum=0.9, weight_decay=0.01)
        cuda_optim.sgd(p.data, g, on_device(np.zeros_like(g_cpu)), lr=0.1, momentum=0.9, weight_decay=0.01)
        np.testing.assert_allclose(p.numpy(), host_params[name], rtol=1e-5, atol=1e-6, err_msg=name)
    next_loss = step(**batch)[0]
    model.to("cpu").load_state_dict(host_params)
    np.testing.assert_allclose(next_loss, step_cpu(**batch)[0], rtol=1e-5)     # both second calls: one mask
