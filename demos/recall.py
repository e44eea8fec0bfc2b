"""Associative recall with additive attention: ``python demos/recall.py [--steps N] [--out DIR]``."""
from attngraph.demos.recall import main

if __name__ == "__main__":
    main()
