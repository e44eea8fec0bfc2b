"""``recurrence``: a time loop whose step is a subgraph (attngraph/core/prims/recurrence.py). The loop belongs to
the body, which runs its compiled step once per time step on this device's kernels; this table only names the
device."""
KERNELS = {"recurrence": lambda init, *inputs, body, **attrs: body.run("cuda", init, *inputs, **attrs)}
