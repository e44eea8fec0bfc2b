"""Reviews: a hierarchical attention network (Yang et al. 2016) classifies whole movie reviews as positive
or negative, and shows which sentences, and which words in them, it read.

Data: ``--data PATH``, the movie-review polarity corpus v2.0 (Pang & Lee 2004: 1,000 positive and 1,000
negative reviews, one sentence per line, in a zip or folder with pos/ and neg/). A seeded 10% is held
out (``LabelledText.split``) and touched only for the final evaluation; 10% of the rest is a validation
set that picks the checkpoint. Words are lower-cased tokens; the vocabulary is the training words seen
at least twice. A review keeps its last 32 sentences (where the verdict usually is) and every sentence
its first 32 words (documents are padded to 32 × 32).

Model: ``HAN`` — word embeddings of 64, a bidirectional word GRU of 2 × 32 and word attention, a
bidirectional sentence GRU of 2 × 32 and sentence attention (attention dimensions 32), a linear layer
to the two classes. The embeddings start random except their first coordinate, each word's naive-Bayes
log-count ratio on the training split (``log_count_ratio``, as the polarity demo). Training: AdamW
(lr 2e-3, weight decay 0.05, cosine decay to 1e-4), batches of 32 reviews, gradients clipped at norm 1,
word dropout 0.2, 500 steps (9.9 epochs); the validation accuracy is measured every 50 steps and the
best parameters are kept (with and without the log-count ratios: benchmarks/MEASUREMENTS.md).

Writes: metrics.json (``heldout_accuracy`` on the held-out 10%), train.jsonl, loss.svg, graph.svg
(+ .dot), attention-sentences.svg (the sentence attention over a held-out review, one row per
sentence) and attention-words-1.svg ... -3.svg (the word attention in its three most attended
sentences), each shaded relative to its largest weight, which its title gives with the uniform weight.
"""
from __future__ import annotations

import numpy as np

import attngraph as ag
from attngraph.core import functional as F
from attngraph.inspect import attention_maps
from attngraph.models import HAN
from attngraph.train.data import pad_documents, sentences, tokenize

from .common import classification_run, log_count_ratio, train_classifier

STEPS = 500
SENTENCES, WORDS = 32, 32
CONFIG = dict(embed_dim=64, word_hidden=32, sentence_hidden=32, attention_dim=32, classes=2)
TRAINING = dict(batch=32, lr=2e-3, weight_decay=0.05, min_lr=1e-4, clip=1.0, word_dropout=0.2, nb_init=1.0,
                eval_every=50, min_count=2, heldout=0.1, validation=0.1)
TOP_SENTENCES = 3


def document(text: str) -> list[list[str]]:
    """A review's last ``SENTENCES`` non-empty sentences, each its first ``WORDS`` tokens."""
    return [words[:WORDS] for words in map(tokenize, sentences(text)) if words][-SENTENCES:]


def main(argv=None) -> dict:
    run, data = classification_run("reviews", __doc__, STEPS, "movie-review polarity", TRAINING, argv)
    args = run.args
    vocab = data.vocab

    def encode(texts):
        return pad_documents([[vocab.encode(s) for s in document(t)] for t in texts], SENTENCES, WORDS)[0]

    train_ids, validation_ids, heldout_ids = (encode(part.texts) for part in (data.train, data.validation,
                                                                               data.heldout))
    model = HAN(len(vocab), rng=run.rng(1), **CONFIG)
    if TRAINING["nb_init"]:
        model.embed.weight.data[:, 0] = TRAINING["nb_init"] * log_count_ratio(train_ids, data.train.labels, len(vocab))
    documents = ag.Input(("B", SENTENCES, WORDS), "int64")
    forward = ag.trace(model, documents=documents)
    run_forward = forward.compile()

    def predict(ids):
        return run_forward(documents=ids)

    def loss_fn(model, documents, labels):
        return F.cross_entropy(model(documents), labels)

    metrics = train_classifier(run, data, (train_ids, validation_ids, heldout_ids), model, loss_fn, predict,
                               dict(documents=documents), TRAINING)

    run.graph(forward)
    shown = heldout_ids[:1]
    maps = attention_maps(forward, documents=shown)
    words = document(data.heldout.texts[0])
    sentence_weights = maps["sentence_attention"][0, 0, :len(words)]             # (S,)
    word_weights = maps["word_attention"].reshape(SENTENCES, WORDS)[:len(words)]  # (S, W)
    guess = data.classes[int(predict(shown)[0].argmax())]
    truth = data.classes[int(data.heldout.labels[0])]
    top = float(sentence_weights.max())
    run.heatmap("attention-sentences.svg", sentence_weights[:, None] / top, ["α ÷ max α"],
                [f"{i + 1}: {_clip(' '.join(s), 60)}" for i, s in enumerate(words)],
                title=f"held-out review ({truth}, classified {guess}): sentence attention, shaded relative to "
                      f"its largest weight {top:.3f} (uniform: {1 / len(words):.3f})")
    for k, i in enumerate(np.argsort(-sentence_weights)[:TOP_SENTENCES], 1):
        alpha = word_weights[i, :len(words[i])]
        run.heatmap(f"attention-words-{k}.svg", alpha[None] / alpha.max(), words[i],
                    [f"sentence {i + 1} (α {sentence_weights[i]:.3f})"],
                    title=f"word attention in the held-out review's sentence {i + 1}, shaded relative to its "
                          f"largest weight {alpha.max():.3f} (uniform: {1 / len(alpha):.3f})")

    return run.finish(task="document polarity (movie reviews v2.0, Pang & Lee 2004)",
                      model="hierarchical attention network (Yang et al. 2016)",
                      config={"data": str(args.data), **data.sizes(), "sentences": SENTENCES, "words": WORDS,
                              "model": CONFIG, "training": TRAINING, "seed": args.seed},
                      metrics=metrics)


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"


if __name__ == "__main__":
    main()
