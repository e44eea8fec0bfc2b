"""Drawing graphs (graphviz) and attention maps."""
from ..errors import RenderError
from .graph import render_graph, to_dot, to_svg
from .heatmap import attention_heatmap
from .overlay import attention_panels
from .picture import Picture, picture
