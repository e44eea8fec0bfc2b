"""Runnable demos: each trains a real model on a task it generates and writes what it learned.

``attngraph demo NAME`` and ``python demos/NAME.py`` both run ``attngraph.demos.NAME.main``.
"""
DEMOS = ("recall",)
DEFAULT = "recall"
