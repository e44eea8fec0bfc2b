"""Writing graphs in other formats: ONNX (``export_onnx``). Like render/ and inspect/, export reads graphs."""
from ..errors import ExportError
from .onnx import export_onnx, to_onnx
