"""Show, Attend and Tell captions generated pictures: ``python demos/captions.py [--steps N] [--out DIR]``."""
from attngraph.demos.captions import main

if __name__ == "__main__":
    main()
