"""The exceptions attngraph raises: each names what went wrong and how to act on it."""


class AttnGraphError(Exception):
    """Base class of every error attngraph raises on purpose."""


class ShapeError(AttnGraphError, ValueError):
    """Shapes that do not fit: raised while the graph is built, naming op, scope, source line and shapes."""


class DTypeError(AttnGraphError, TypeError):
    """A dtype that an op does not accept, or two operands whose dtypes differ."""


class TracingError(AttnGraphError):
    """Something that cannot be traced into a graph, e.g. branching on a traced value."""


class BindingError(AttnGraphError, ValueError):
    """Run-time inputs that do not fit the graph: missing, extra, or inconsistent symbolic dimensions."""


class NonFiniteError(AttnGraphError, FloatingPointError):
    """NaN or Inf where it must not be: a node's output in debug mode, a Trainer's loss with
    ``on_nonfinite="raise"``, logits with nothing to sample from."""


class DeviceError(AttnGraphError):
    """A device that is unknown, unavailable, or lacks a kernel for an op."""


class CheckpointError(AttnGraphError):
    """A checkpoint that cannot be written, read, or loaded into the model."""


class DataError(AttnGraphError, ValueError):
    """A data set that cannot be read, downloaded or encoded."""


class RenderError(AttnGraphError):
    """A drawing that cannot be made (e.g. graphviz's ``dot`` is missing)."""


class ExportError(AttnGraphError):
    """A graph that cannot be written as ONNX, or ``onnx`` not installed."""


class DistributedError(AttnGraphError):
    """Ranks of an MPI world that disagree on what they must share (parameters, model, version, step, data)."""


class CollectiveTimeout(DistributedError, TimeoutError):
    """An MPI collective that waited longer than the world's timeout for the other ranks."""
