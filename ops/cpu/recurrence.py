"""``scan``: a time loop whose step is a subgraph (attngraph/core/prims/recurrence.py)."""


def scan(init, *inputs, body, reverse):
    return body.run("cpu", None, init, *inputs, reverse=reverse)


KERNELS = {"scan": scan}
