"""Writing graphs in other formats: ONNX (``export_onnx``). Like render/ and inspect/, export reads graphs."""
from .onnx import ExportError, export_onnx, to_onnx
