"""Sentence polarity with structured self-attention: ``python demos/polarity.py --data PATH [--steps N]``."""
from attngraph.demos.polarity import main

if __name__ == "__main__":
    main()
