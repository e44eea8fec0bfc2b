"""Reading graphs and models: gradient checks (summaries and FLOPs come with the rendering work)."""
from .gradcheck import GradcheckReport, gradcheck, gradcheck_parameters
