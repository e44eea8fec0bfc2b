"""Reading graphs and models: summaries, FLOP counts, networkx queries, attention maps, gradient checks, kernel
profiles."""
from .attention import attention_maps
from .calls import Call, call_paths
from .flops import binding, format_count, node_flops, total_flops
from .gradcheck import GradcheckReport, gradcheck, gradcheck_parameters
from .profile import Profile, Profiler, profile
from .query import module_subgraph, nodes_by_op, nodes_by_scope, path_between
from .summary import Summary, summary
