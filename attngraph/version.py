"""The version of attngraph, once: pyproject.toml reads it from here, and so do checkpoints and ONNX files."""
__version__ = "0.1.0"
