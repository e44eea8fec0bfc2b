"""Associative recall with additive (Bahdanau) attention.

Each example is a sequence of distinct tokens and a query token taken from it; the answer is the token
that follows the query. A model with additive attention, score(q, hₜ) = vᵀ tanh(W_q q + W_k hₜ)
(Bahdanau et al. 2015), learns to put its attention on the query's position and read the next token from
the state there: hₜ = [embed(xₜ); embed(xₜ₊₁)].
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

import attngraph as ag
from attngraph.nn import Embedding, Linear, Parameter, init
from attngraph.train import Adam


class AdditiveRecall(ag.Module):
    def __init__(self, vocab: int, dim: int = 32, hidden: int = 32):
        super().__init__()
        self.embed = Embedding(vocab, dim)
        self.w_query = Linear(dim, hidden, bias=False)
        self.w_key = Linear(2 * dim, hidden)
        self.v = Parameter(init.uniform((hidden,), 1 / np.sqrt(hidden)))
        self.out = Linear(2 * dim, vocab)

    def forward(self, tokens, next_tokens, query):
        h = ag.concat([self.embed(tokens), self.embed(next_tokens)], axis=-1)     # (B, T, 2d)
        q = ag.expand_dims(self.w_query(self.embed(query)), 1)                   # (B, 1, hidden)
        alpha = ag.softmax(ag.tanh(q + self.w_key(h)) @ self.v)                  # (B, T)
        context = ag.sum(ag.expand_dims(alpha, -1) * h, axis=1)                  # (B, 2d)
        return self.out(context), alpha


def make_batch(rng: np.random.Generator, batch: int, length: int, vocab: int):
    tokens = np.stack([rng.choice(vocab, size=length + 1, replace=False) for _ in range(batch)])
    where = rng.integers(0, length, size=batch)
    rows = np.arange(batch)
    return dict(tokens=tokens[:, :-1], next_tokens=tokens[:, 1:], query=tokens[rows, where]), \
        tokens[rows, where + 1], where


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(prog="attngraph demo recall", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/recall"))
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    vocab, length, batch = 24, 8, 64
    init.manual_seed(args.seed)
    model = AdditiveRecall(vocab)
    specs = dict(tokens=ag.Input(("B", "T"), "int64"), next_tokens=ag.Input(("B", "T"), "int64"),
                 query=ag.Input(("B",), "int64"), answer=ag.Input(("B",), "int64"))

    def loss(tokens, next_tokens, query, answer):
        logits, alpha = model(tokens, next_tokens, query)
        return {"loss": ag.cross_entropy(logits, answer), "logits": logits, "attention": alpha}

    graph = ag.trace(loss, **specs)
    step = graph.grad(output="loss").compile()
    params = [node.value for node in graph.parameters.values()]
    optimizer = Adam(params, lr=3e-3)
    rng = np.random.default_rng(args.seed)
    start = time.perf_counter()
    for _ in range(args.steps):
        inputs, answer, _ = make_batch(rng, batch, length, vocab)
        loss_value, _, _, *grads = step(**inputs, answer=answer)
        optimizer.step(grads)
    inputs, answer, where = make_batch(np.random.default_rng(args.seed + 1), 1000, length, vocab)
    _, logits, attention = graph.compile()(**inputs, answer=answer)
    metrics = dict(task="associative recall", model="additive attention", steps=args.steps,
                   wall_seconds=round(time.perf_counter() - start, 2), final_train_loss=float(loss_value),
                   heldout_accuracy=float(np.mean(logits.argmax(-1) == answer)),
                   heldout_attention_on_query=float(np.mean(attention.argmax(-1) == where)))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    graph.render(args.out / "graph.svg")
    print(json.dumps(metrics, indent=2))
    print(f"wrote {args.out / 'metrics.json'} and {args.out / 'graph.svg'}")
    return metrics


if __name__ == "__main__":
    main()
