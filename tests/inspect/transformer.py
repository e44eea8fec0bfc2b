"""A two-layer transformer encoder built from the zoo's parts, shared by the render, inspect and CLI tests.

It is also a model file for the command line: ``attngraph render tests/inspect/transformer.py:SPEC`` (a
``ModelSpec``) or ``tests/inspect/transformer.py:forward_graph`` (a function returning a graph).
"""
import attngraph as ag
from attngraph.attention import MultiHeadAttention
from attngraph.models import ModelSpec
from attngraph.nn import MLP, Embedding, LayerNorm, Linear, ModuleList


class Block(ag.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.attn = MultiHeadAttention(d, heads)
        self.norm1 = LayerNorm(d)
        self.mlp = MLP([d, 2 * d, d])
        self.norm2 = LayerNorm(d)

    def forward(self, x):
        x = self.norm1(x + self.attn(x, x, x))
        return self.norm2(x + self.mlp(x))


class Encoder(ag.Module):
    def __init__(self, d=16, heads=2, layers=2, vocab=11):
        super().__init__()
        self.embed = Embedding(vocab, d)
        self.layers = ModuleList([Block(d, heads) for _ in range(layers)])
        self.head = Linear(d, vocab)

    def forward(self, tokens):
        x = self.embed(tokens)
        for layer in self.layers:
            x = layer(x)
        return self.head(x)


def inputs(model):
    return dict(tokens=ag.Input(("B", "T"), "int64"))


def batch(model, rng, size):
    tokens = rng.integers(0, model.embed.num_embeddings, (size, 5))
    return dict(tokens=tokens, targets=tokens[:, ::-1].copy())


def loss(model, tokens, targets):
    return ag.cross_entropy(model(tokens), targets)


SPEC = ModelSpec("test-encoder", Encoder, inputs, batch, loss, defaults=dict(d=16, heads=2, layers=2, vocab=11),
                 tiny=dict(d=8, heads=2, layers=1, vocab=5), description="two-layer encoder of the tests")


def forward_graph(layers=2):
    model = Encoder(layers=layers)
    return ag.trace(model, **inputs(model))


def loss_graph(model):
    """The loss on symbolic tokens and targets; traced from a function, the model's scopes start with
    ``encoder.``."""
    return ag.trace(lambda tokens, targets: loss(model, tokens, targets),
                    tokens=ag.Input(("B", "T"), "int64"), targets=ag.Input(("B", "T"), "int64"))
