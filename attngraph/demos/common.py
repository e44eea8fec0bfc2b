"""What every demo shares: its arguments, its output folder, threads, the training loop, and the files it
writes. A demo module holds its own model, data and evaluation, and reads like this::

    def main(argv=None) -> dict:
        parser = demo_parser("copy", __doc__, steps=1500)          # --out, --steps, --seed, --threads
        run = Run(parser, argv)                                    # parses, sets threads, starts the clock
        trainer = run.train(model, loss_fn, optimizer, batches)    # attngraph.train.Trainer, --steps steps
        run.graph(ag.trace(model, **inputs))                       # graph.svg (graph.dot without graphviz)
        run.heatmap("attention.svg", weights, source, target)      # attention heatmaps
        return run.finish(task=..., model=..., config=..., metrics={"heldout_exact_match": ...})

``finish`` draws the loss curve (loss.svg) and writes metrics.json: demo, task, model, config, steps,
wall_seconds (from ``Run`` to the end of ``finish``, everything included: tracing, compiling, training,
evaluation, pictures), train_seconds, final_train_loss (the mean loss of the last ``FINAL_STEPS`` steps),
the demo's held-out metrics, and the files written. The trainer also appends a line per step to
train.jsonl (``Trainer``'s metrics file).

Threads (``--threads``, default 1): on a small machine shared with other jobs the engine runs fastest on
one thread. OpenBLAS's threads wait for one another inside every product, and when another process holds a
core they wait for a whole time slice; numba's OpenMP threads, spinning between kernels, make it worse. So a
demo sets OpenBLAS's thread count
(OPENBLAS_NUM_THREADS, read when numba first loads SciPy's BLAS, i.e. before the first kernel runs; in a
process that has already run kernels only numba's count changes) and numba's (``numba.set_num_threads``),
and lets idle OpenMP threads sleep rather than spin (OMP_WAIT_POLICY=passive, unless set).

Several processes: under ``mpiexec -n N attngraph demo NAME`` every rank runs the demo and the Trainer splits each
step's batches over the ranks (its default world, attngraph/train/distributed.py); only rank 0 writes the output
folder and prints, the others draw their files in a temporary folder deleted at exit.

Arguments: every option is checked before any work (``arguments``: a bad one is one line on stderr and exit
status 2): numbers by their types, the output folder by ``Run`` (created, and written to once), and the input
files named in ``Run(..., paths=...)`` (a missing one is a usage error). A demo reads its data, and draws its
held-out examples, before it builds its model: a corpus too small for the demo fails at once (``DataError``).
"""
from __future__ import annotations

import argparse
import atexit
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..core import Input
from ..render.curves import line_chart
from ..errors import RenderError
from ..render.heatmap import attention_heatmap
from ..train import Adam, AdamW, CosineDecay, Trainer, distributed
from ..train.data import LabelledText, Vocabulary, read_labelled_text, tokenize
from .arguments import Parser, positive_int, seed, writable_folder

FINAL_STEPS = 20        # final_train_loss averages the losses of this many last steps
SMOOTHING = 0.95        # the loss curve's exponential moving average
HELDOUT_SEED = 1_000_003    # a task demo's held-out pairs are drawn with the seed plus this


def demo_parser(name: str, doc: str, steps: int) -> argparse.ArgumentParser:
    """The arguments every demo takes; the demo adds its own (``--text``, ``--data``, ...). The help shows
    the module docstring, which gives the demo's configuration."""
    parser = Parser(prog=f"attngraph demo {name}", description=doc,
                    formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("runs") / name,
                        help=f"output folder (default: runs/{name})")
    parser.add_argument("--steps", type=positive_int, default=steps,
                        help=f"optimizer steps (default: {steps}, the full configuration)")
    parser.add_argument("--seed", type=seed, default=0, help="seed of the data, the initialization and dropout")
    parser.add_argument("--threads", type=positive_int, default=1,
                        help="CPU threads for numba's kernels and BLAS (default: 1; see attngraph.demos.common)")
    return parser


def use_threads(count: int) -> None:
    """Run numba's kernels and OpenBLAS on ``count`` threads (see the module docstring)."""
    import numba
    os.environ["OPENBLAS_NUM_THREADS"] = str(count)
    os.environ.setdefault("OMP_WAIT_POLICY", "passive")
    numba.set_num_threads(min(count, numba.config.NUMBA_NUM_THREADS))


class Run:
    """One run of a demo: parsed arguments (``args``), the output folder (``out``), the clock, the trainer
    and the files written so far."""

    def __init__(self, parser: argparse.ArgumentParser, argv: Sequence[str] | None = None,
                 paths: dict[str, str] | None = None):
        """Parse ``argv``; ``paths`` maps the arguments naming input files ({"data": "the corpus"}) to what
        they are: one given but missing is a usage error (exit status 2), raised before anything is done, as is
        an output folder that cannot be written (``--out`` is created here)."""
        self.args = parser.parse_args(argv)
        for key, what in (paths or {}).items():
            path = getattr(self.args, key)
            if path is not None and not Path(path).exists():
                parser.error(f"{what} not found: {path} (--{key.replace('_', '-')})")
        try:
            self.out: Path = writable_folder(self.args.out)
        except argparse.ArgumentTypeError as e:
            parser.error(f"--out: {e}")
        self.name = parser.prog.split()[-1]
        self.world = distributed.world()        # under mpiexec, the ranks train together (the Trainer's default)
        if self.world.rank != 0:                # only rank 0 writes the run's files and prints
            self.out = Path(tempfile.mkdtemp(prefix=f"attngraph-{self.name}-rank{self.world.rank}-"))
            atexit.register(shutil.rmtree, self.out, ignore_errors=True)
        use_threads(self.args.threads)
        self.started = time.perf_counter()
        self.files: list[str] = []
        self.trainer: Trainer | None = None
        self.train_seconds = 0.0
        self.seed: int = self.args.seed

    def path(self, filename: str) -> Path:
        """``out/filename``, recorded as written."""
        if filename not in self.files:
            self.files.append(filename)
        return self.out / filename

    def rng(self, stream: int = 0) -> np.random.Generator:
        """A generator for the run's seed and a numbered stream (initialization, evaluation data, ...)."""
        return np.random.default_rng([self.seed, stream])

    def train(self, model, loss_fn: Callable, optimizer, batches: Callable[[np.random.Generator], dict],
              steps: int | None = None, resume: Path | None = None, **options) -> Trainer:
        """Train with ``attngraph.train.Trainer`` (``options`` are its keyword arguments) for ``--steps``
        steps; logs every step to train.jsonl. The trainer shows its progress and the kernels numba compiles
        (on a first run, in the first step): a bar on terminals, lines on stderr otherwise. ``resume``: a
        checkpoint of this run to continue from; train.jsonl keeps its records up to the checkpoint's step."""
        metrics_path = self.path("train.jsonl")
        self.trainer = Trainer(model, loss_fn, optimizer, metrics_path=metrics_path, seed=self.seed, **options)
        if resume is not None:
            self.trainer.load(resume)
        kept = _records(metrics_path, self.trainer.step)
        metrics_path.write_text("".join(json.dumps(r) + "\n" for r in kept))     # the trainer appends
        self.trainer.history = kept
        started = time.perf_counter()
        self.trainer.fit(batches, self.args.steps if steps is None else steps)
        self.train_seconds += time.perf_counter() - started
        return self.trainer

    def graph(self, graph, filename: str = "graph.svg", **options) -> Path | None:
        """Draw ``graph`` (``Graph.render``'s options); without graphviz the .dot is written instead, with a
        warning."""
        try:
            return graph.render(self.path(filename), **options)
        except RenderError as e:
            self.files.remove(filename)
            self.files.append(Path(filename).with_suffix(".dot").name)
            print(f"warning: {e}", file=sys.stderr)
            return None

    def heatmap(self, filename: str, weights, x_labels, y_labels, title: str = "") -> Path:
        """An attention heatmap (``attngraph.render.attention_heatmap``)."""
        return attention_heatmap(weights, list(x_labels), list(y_labels), self.path(filename), title=title)

    def loss_curve(self, filename: str = "loss.svg") -> Path:
        """The training loss (each step, and its moving average) and every metric of the evaluations made
        during training (a validation loss or accuracy), on one chart."""
        records = self.trainer.history if self.trainer else []
        train = [(r["step"], r["loss"]) for r in records if r["kind"] == "train"]
        steps, losses = (np.array(v, np.float64) for v in zip(*train)) if train else (np.zeros(0), np.zeros(0))
        series = {"train loss": (steps, losses), "train loss (smoothed)": (steps, _ema(losses, SMOOTHING))}
        evaluations = [r for r in records if r["kind"] == "eval"]
        for key in dict.fromkeys(k for r in evaluations for k in r if k not in ("kind", "step")):
            series[key.replace("_", " ")] = tuple(zip(*[(r["step"], r[key]) for r in evaluations if key in r]))
        positive = losses[np.isfinite(losses)]
        log_y = positive.size > 0 and positive.min() > 0 and positive.max() / positive.min() > 50
        title = f"{self.name}: training loss" + (" and evaluations" if evaluations else "")
        others = [name for name in list(series)[2:] if "loss" not in name]
        return line_chart(series, self.path(filename), title=title, y_label=", ".join(["loss", *others]),
                          log_y=log_y)

    def finish(self, *, task: str, model: str, config: dict, metrics: dict, extra: dict | None = None) -> dict:
        """Draw the loss curve, write metrics.json and print it; returns the metrics."""
        self.loss_curve()
        losses = [r["loss"] for r in (self.trainer.history if self.trainer else []) if r["kind"] == "train"]
        result = {"demo": self.name, "task": task, "model": model, "config": config,
                  "steps": self.trainer.step if self.trainer else 0,
                  "final_train_loss": float(np.mean(losses[-FINAL_STEPS:])) if losses else None,
                  **{key: _plain(value) for key, value in metrics.items()},
                  "train_seconds": round(self.train_seconds, 2),
                  **(extra or {})}
        path = self.path("metrics.json")
        result["files"] = list(self.files)
        result["wall_seconds"] = round(time.perf_counter() - self.started, 2)
        path.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        if self.world.rank != 0:
            return result
        shown = {k: v for k, v in result.items() if not isinstance(v, (dict, list)) and k != "sample"}
        print(json.dumps(shown, indent=2, ensure_ascii=False))
        print(f"wrote {', '.join(self.files)} in {self.out}")
        return result


class BestParameters:
    """A Trainer callback keeping a copy of the parameters at the best evaluation of ``monitor`` (model
    selection on a validation set); ``restore()`` puts them back into the model."""

    def __init__(self, model, monitor: str, mode: str = "max"):
        self.model, self.monitor, self.mode = model, monitor, mode
        self.value: float | None = None
        self.step: int | None = None
        self.state: dict | None = None

    def __call__(self, trainer, record) -> None:
        if record["kind"] != "eval" or self.monitor not in record:
            return
        value = record[self.monitor]
        if self.value is None or (value > self.value if self.mode == "max" else value < self.value):
            self.value, self.step = value, record["step"]
            self.state = self.model.state_dict()          # copies

    def restore(self) -> None:
        if self.state is not None:
            self.model.load_state_dict(self.state)


def train_on_task(run: Run, model, loss_fn: Callable, task, encode: Callable, training: dict,
                  inputs: dict) -> Trainer:
    """Train on a sequence task (``attngraph.train.data``) as the task demos do: batches of training["batch"]
    pairs drawn from a pool of training["train_pool"] pairs of the task's training split, made into the loss's
    arrays by ``encode``; Adam at training["lr"] with a linear warm-up over training["warmup"] steps (at most
    all but the last) and cosine decay to training["min_lr"]; gradients clipped at norm training["clip"]. Returns
    the trainer (``Run.train``)."""
    pool = task.sample(training["train_pool"], "train", seed=run.seed)

    def batches(rng):
        return encode([pool[i] for i in rng.integers(0, len(pool), training["batch"])])

    steps = run.args.steps
    return run.train(model, loss_fn, Adam(model, lr=training["lr"]), batches, inputs=inputs, clip=training["clip"],
                     schedule=CosineDecay(training["lr"], steps, min(training["warmup"], steps - 1),
                                          training["min_lr"]))


def heldout_pairs(run: Run, task) -> list:
    """The ``--heldout`` distinct pairs of a task's held-out split that a task demo evaluates on, drawn with a
    seed of their own."""
    return task.sample(run.args.heldout, "heldout", seed=run.seed + HELDOUT_SEED, distinct=True)


@dataclass
class Classification:
    """A labelled corpus split for a classification demo: ``heldout`` (touched only by the final
    evaluation), ``validation`` (model selection) and ``train``, each a ``LabelledText``, and the
    vocabulary of the training texts' tokens seen at least ``min_count`` times (<pad> 0, <unk> 1)."""

    classes: list[str]
    train: LabelledText
    validation: LabelledText
    heldout: LabelledText
    vocab: Vocabulary

    @classmethod
    def read(cls, path, seed: int, heldout: float = 0.1, validation: float = 0.1, min_count: int = 2,
             limit: int | None = None) -> Classification:
        """Read ``path`` (``read_labelled_text``), optionally keep a random ``limit`` of its examples, hold
        out ``heldout`` of them, and ``validation`` of the rest."""
        data = read_labelled_text(path)
        if limit:
            data = data.subset(np.sort(np.random.default_rng([seed, 9]).permutation(len(data))[:limit]))
        train, test = data.split(heldout, seed=seed)
        train, val = train.split(validation, seed=seed + 1)
        vocab = Vocabulary.build((tokenize(t) for t in train.texts), min_count=min_count)
        return cls(data.classes, train, val, test, vocab)

    def sizes(self) -> dict:
        return {"train": len(self.train), "validation": len(self.validation), "heldout": len(self.heldout),
                "vocab": len(self.vocab)}


def classification_run(name: str, doc: str, steps: int, corpus: str, training: dict,
                       argv) -> tuple[Run, Classification]:
    """A labelled-text demo's run (``--data PATH``, ``--limit N`` for smoke tests) and its corpus, split."""
    parser = demo_parser(name, doc, steps=steps)
    parser.add_argument("--data", type=Path, required=True, help=f"the {corpus} zip or folder")
    parser.add_argument("--limit", type=positive_int, help="use only this many examples (smoke tests)")
    run = Run(parser, argv, paths={"data": f"the {corpus} corpus"})
    data = Classification.read(run.args.data, run.args.seed, training["heldout"], training["validation"],
                               training["min_count"], run.args.limit)
    return run, data


def train_classifier(run: Run, data: Classification, ids: tuple, model, loss_fn: Callable, predict: Callable,
                     inputs: dict, training: dict) -> dict:
    """Train a classifier of ``data`` as the classification demos do, and measure it. ``ids`` are the encoded
    training, validation and held-out examples; ``inputs`` holds the model's one input (name: ``Input``), fed
    batches of training["batch"] training examples under word dropout (``word_dropout``, training["word_dropout"])
    beside their ``labels``. AdamW (training["lr"], training["weight_decay"]) with cosine decay to
    training["min_lr"], gradients clipped at norm training["clip"]; the validation accuracy of ``predict``,
    measured every training["eval_every"] steps, picks the parameters kept (``BestParameters``). Returns the
    metrics: heldout_accuracy (those parameters, the model set to evaluation), best_val_accuracy and best_step."""
    train_ids, validation_ids, heldout_ids = ids
    (name,) = inputs
    steps = run.args.steps

    def batches(rng):
        rows = rng.integers(0, len(train_ids), training["batch"])
        return {name: word_dropout(train_ids[rows], rng, training["word_dropout"], data.vocab.unk),
                "labels": data.train.labels[rows]}

    best = BestParameters(model, "val_accuracy", mode="max")
    run.train(model, loss_fn, AdamW(model, lr=training["lr"], weight_decay=training["weight_decay"]), batches,
              inputs={**inputs, "labels": Input(("B",), "int64")},
              clip=training["clip"], schedule=CosineDecay(training["lr"], steps, 0, training["min_lr"]),
              eval_every=min(training["eval_every"], steps),
              eval_fn=lambda model: {"val_accuracy": accuracy(predict, validation_ids, data.validation.labels)},
              callbacks=[best])
    best.restore()
    model.eval()
    return {"heldout_accuracy": accuracy(predict, heldout_ids, data.heldout.labels),
            "best_val_accuracy": best.value, "best_step": best.step}


def word_dropout(ids: np.ndarray, rng: np.random.Generator, p: float, unk: int, pad: int = 0) -> np.ndarray:
    """``ids`` with every word (not padding) replaced by ``unk`` with probability ``p`` (Iyyer et al. 2015)."""
    return np.where((ids != pad) & (rng.random(ids.shape) < p), unk, ids)


def accuracy(predict: Callable[[np.ndarray], np.ndarray], inputs: np.ndarray, labels: np.ndarray,
             batch: int = 128) -> float:
    """The fraction of ``inputs`` whose logits ``predict(inputs[i:j])`` pick the label, in batches."""
    logits = np.concatenate([predict(inputs[i:i + batch]) for i in range(0, len(inputs), batch)])
    return float(np.mean(logits.argmax(-1) == labels))


def log_count_ratio(ids: np.ndarray, labels: np.ndarray, vocab: int, alpha: float = 1.0) -> np.ndarray:
    """Naive Bayes' log-count ratio of every word id, for two classes (Wang & Manning 2012), scaled to
    unit standard deviation: r ∝ log(p / ‖p‖₁) − log(q / ‖q‖₁), p = α + the number of class-1 examples
    holding the word, q the same for class 0; 0 for <pad> and <unk> (ids 0 and 1). ``ids`` (N, ...) are
    the training examples, ``labels`` (N,) theirs: a word's polarity as the training split shows it."""
    counts = np.zeros((2, vocab))
    for row, label in zip(ids, labels):
        counts[label, np.unique(row)] += 1
    p, q = counts[1] + alpha, counts[0] + alpha
    ratio = np.log(p / p.sum()) - np.log(q / q.sum())
    ratio[:2] = 0
    return (ratio / ratio.std()).astype(np.float32)


def _records(path: Path, step: int) -> list[dict]:
    """The records of the metrics file ``path`` up to ``step`` (none for step 0, or without a file)."""
    if step == 0 or not path.exists():
        return []
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [r for r in records if r["step"] <= step]


def _ema(values: np.ndarray, decay: float) -> np.ndarray:
    """Bias-corrected exponential moving average."""
    out, average = np.empty_like(values), 0.0
    for i, v in enumerate(values):
        average = decay * average + (1 - decay) * v
        out[i] = average / (1 - decay ** (i + 1))
    return out


def _plain(value):
    """NumPy scalars as Python numbers, for JSON."""
    return value.item() if isinstance(value, np.generic) else value
