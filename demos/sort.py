"""Sorting with a GPT-style decoder: ``python demos/sort.py [--steps N] [--out DIR]``."""
from attngraph.demos.sort import main

if __name__ == "__main__":
    main()
