"""Drawing graphs (graphviz) and attention maps."""
from .graph import RenderError, render_graph, to_dot
