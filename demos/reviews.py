"""Movie-review polarity with a hierarchical attention network: ``python demos/reviews.py --data PATH [--steps N]``."""
from attngraph.demos.reviews import main

if __name__ == "__main__":
    main()
