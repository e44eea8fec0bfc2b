"""Copy with a Transformer encoder-decoder: ``python demos/copy.py [--steps N] [--out DIR]``."""
if __name__ == "copy":
    # `python demos/ANY.py` puts this folder first on sys.path, where this file's name hides the standard
    # library's `copy`, which the imports below (and dataclasses) need: imported under that name, this
    # file hands over to the standard module.
    import importlib.util
    import sys
    import sysconfig
    _spec = importlib.util.spec_from_file_location("copy", f"{sysconfig.get_path('stdlib')}/copy.py")
    sys.modules["copy"] = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(sys.modules["copy"])
else:
    from attngraph.demos.copy import main

    if __name__ == "__main__":
        main()
