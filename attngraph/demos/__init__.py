"""Runnable demos: each trains a real model, evaluates it on held-out data and writes what it learned.

``attngraph demo NAME [--out DIR] [--steps N] ...`` (or ``python -m attngraph demo NAME``) runs
``attngraph.demos.NAME.main``; ``--help`` shows a demo's configuration. Each writes into its output
folder (default ``runs/NAME``) metrics.json, train.jsonl, loss.svg, graph.svg and attention heatmaps;
``common`` holds what they share.
"""
DEMOS = ("copy", "dates", "sort", "shakespeare", "polarity", "reviews", "recall", "captions")
DEFAULT = "copy"
