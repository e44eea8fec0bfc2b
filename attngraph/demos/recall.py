"""Associative recall with additive (Bahdanau) attention.

Each example is a sequence of distinct tokens and a query token taken from it; the answer is the token
that follows the query. A model with additive attention, score(q, hₜ) = vᵀ tanh(W_q q + W_k hₜ)
(Bahdanau et al. 2015), learns to put its attention on the query's position and read the next token from
the state there: hₜ = [embed(xₜ); embed(xₜ₊₁)].

Configuration: 24 tokens, sequences of 8, embeddings of 32, attention and output from 32 units; Adam
(lr 3e-3), batches of 64, 400 steps. Evaluation on 1,000 fresh examples: ``heldout_accuracy`` (the
answer) and ``heldout_attention_on_query`` (the attention's largest weight is on the query's position).

Writes: metrics.json, train.jsonl, loss.svg, graph.svg (+ .dot), and attention.svg: the attention over
the positions of eight fresh sequences, one per row — on the query.
"""
from __future__ import annotations

import numpy as np

import attngraph as ag
from attngraph.models.recall import AdditiveRecall, make_batch
from attngraph.nn import init
from attngraph.train import Adam

from .common import Run, demo_parser


def main(argv=None) -> dict:
    parser = demo_parser("recall", __doc__, steps=400)
    run = Run(parser, argv)
    vocab, length, batch = 24, 8, 64
    init.manual_seed(run.seed)
    model = AdditiveRecall(vocab)
    sequences = dict(tokens=ag.Input(("B", "T"), "int64"), next_tokens=ag.Input(("B", "T"), "int64"),
                     query=ag.Input(("B",), "int64"))

    def batches(rng):
        inputs, answer, _ = make_batch(rng, batch, length, vocab)
        return {**inputs, "answer": answer}

    def loss_fn(model, tokens, next_tokens, query, answer):
        return ag.cross_entropy(model(tokens, next_tokens, query)[0], answer)

    run.train(model, loss_fn, Adam(model, lr=3e-3), batches,
              inputs={**sequences, "answer": ag.Input(("B",), "int64")})
    forward = ag.trace(model, **sequences)
    inputs, answer, where = make_batch(run.rng(1), 1000, length, vocab)
    logits, attention = forward.compile()(**inputs)

    run.graph(forward)
    shown = range(8)
    run.heatmap("attention.svg", attention[list(shown)], [f"position {t}" for t in range(length)],
                [f"{' '.join(map(str, inputs['tokens'][i]))} · query {inputs['query'][i]}" for i in shown],
                title="additive attention of fresh sequences (one per row) over their positions")
    return run.finish(task="associative recall", model="additive attention",
                      config={"vocab": vocab, "length": length, "batch": batch, "lr": 3e-3, "seed": run.seed},
                      metrics={"heldout_accuracy": float(np.mean(logits.argmax(-1) == answer)),
                               "heldout_attention_on_query": float(np.mean(attention.argmax(-1) == where))})


if __name__ == "__main__":
    main()
