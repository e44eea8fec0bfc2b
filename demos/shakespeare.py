"""A character-level GPT on tinyshakespeare: ``python demos/shakespeare.py --text PATH [--steps N] [--out DIR]``."""
from attngraph.demos.shakespeare import main

if __name__ == "__main__":
    main()
