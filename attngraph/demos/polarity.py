"""Polarity: structured self-attention (Lin et al. 2017) classifies movie-review snippets as positive or
negative, and shows which words each attention hop reads.

Data: ``--data PATH``, the MR sentence-polarity corpus (Pang & Lee 2005: 5,331 positive and 5,331
negative snippets, a zip or folder with rt-polarity.pos and rt-polarity.neg). A seeded 10% is held out
(``LabelledText.split``) and touched only for the final evaluation; 10% of the rest is a validation
set that picks the checkpoint. Words are lower-cased tokens (``tokenize``); the vocabulary is the
training words seen at least twice (the others are <unk>); sentences are cut or padded to 48 tokens
(99% are shorter).

Model: ``StructuredClassifier`` — word embeddings of 64, a bidirectional LSTM of 2 × 64, r = 4
attention hops A = softmax(W_s2 tanh(W_s1 Hᵀ)) with d_a = 64, the flattened M = AH into a ReLU layer of
64 and the two classes — trained on cross-entropy + 0.1 · ‖AAᵀ − I‖²_F (the penalty). The embeddings start
random (N(0, 1)) except their first coordinate, which starts at each word's naive-Bayes log-count ratio
on the training split (Wang & Manning 2012; ``log_count_ratio``). The runs that chose this configuration,
and its held-out accuracy, are in benchmarks/MEASUREMENTS.md.
Training: AdamW (lr 2e-3, weight decay 0.05, cosine decay to 1e-4), batches of 32, gradients clipped at
norm 1, word dropout 0.3 (each training word becomes <unk> with that probability), 1,800 steps (6.7
epochs); the validation accuracy is measured every 150 steps and the best parameters are kept.

Writes: metrics.json (``heldout_accuracy`` on the held-out 10%), train.jsonl, loss.svg, graph.svg (+ .dot),
and attention-1.svg ... attention-4.svg: the hops' weights over the first four held-out sentences.
"""
from __future__ import annotations

import attngraph as ag
from attngraph.attention import redundancy_penalty
from attngraph.core import functional as F
from attngraph.models import StructuredClassifier
from attngraph.train.data import pad_sequences, tokenize

from .common import classification_run, log_count_ratio, train_classifier

STEPS = 1800
LENGTH = 48
CONFIG = dict(embed_dim=64, hidden=64, attention_dim=64, hops=4, mlp_hidden=64, classes=2, penalty=0.1)
TRAINING = dict(batch=32, lr=2e-3, weight_decay=0.05, min_lr=1e-4, clip=1.0, word_dropout=0.3, nb_init=1.0,
                eval_every=150, min_count=2, heldout=0.1, validation=0.1)
SHOWN = 4


def main(argv=None) -> dict:
    run, data = classification_run("polarity", __doc__, STEPS, "sentence-polarity", TRAINING, argv)
    args = run.args
    vocab = data.vocab

    def encode(texts):
        return pad_sequences([vocab.encode(tokenize(t)) for t in texts], LENGTH)[0]

    train_ids, validation_ids, heldout_ids = (encode(part.texts) for part in (data.train, data.validation,
                                                                               data.heldout))
    model = StructuredClassifier(len(vocab), rng=run.rng(1), **CONFIG)
    if TRAINING["nb_init"]:
        model.embed.weight.data[:, 0] = TRAINING["nb_init"] * log_count_ratio(train_ids, data.train.labels, len(vocab))
    tokens = ag.Input(("B", LENGTH), "int64")
    forward = ag.trace(model, tokens=tokens)
    run_forward = forward.compile()

    def predict(ids):
        return run_forward(tokens=ids)[0]

    def loss_fn(model, tokens, labels):
        logits, weights = model(tokens)
        penalty = redundancy_penalty(weights)
        return {"loss": F.cross_entropy(logits, labels) + model.penalty * penalty, "penalty": penalty}

    metrics = train_classifier(run, data, (train_ids, validation_ids, heldout_ids), model, loss_fn, predict,
                               dict(tokens=tokens), TRAINING)

    run.graph(forward)
    logits, weights = run_forward(tokens=heldout_ids[:SHOWN])
    for i in range(min(SHOWN, len(data.heldout))):
        words = tokenize(data.heldout.texts[i])[:LENGTH]
        guess, truth = data.classes[int(logits[i].argmax())], data.classes[int(data.heldout.labels[i])]
        run.heatmap(f"attention-{i + 1}.svg", weights[i][:, :len(words)], words,
                    [f"hop {h + 1}" for h in range(CONFIG["hops"])],
                    title=f"structured self-attention, held-out sentence {i + 1}: {truth}, classified {guess}")

    return run.finish(task="sentence polarity (MR, Pang & Lee 2005)",
                      model="structured self-attention (Lin et al. 2017) with the penalty",
                      config={"data": str(args.data), **data.sizes(), "length": LENGTH, "model": CONFIG,
                              "training": TRAINING, "seed": args.seed},
                      metrics=metrics)


if __name__ == "__main__":
    main()
