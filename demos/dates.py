"""Date translation with a GRU encoder-decoder and additive attention: ``python demos/dates.py [--steps N]``."""
from attngraph.demos.dates import main

if __name__ == "__main__":
    main()
