"""numba.cuda kernels, one module per op family: the twins of ops/cpu, with the same names and contracts.

Device arrays in, new device arrays out; nothing here knows about graphs. Each module's ``KERNELS`` table names
what it computes, by primitive, and ``backend.py`` gathers them into the CUDA Backend (ops/backend.py).
Importing any of these modules imports numba.cuda through ops/_cuda.py; attngraph does so only when "cuda" is
first used.

Every elementwise op of ops/cpu/elementwise.py is here without a line of its own: ``elementwise.py`` compiles
each CPU scalar function for CUDA.

The math is shared with the CPU where it can be: elementwise ops and the optimizers' updates are the CPU's
own scalar code compiled as CUDA device functions (``_cuda.device_function``), and kernels call ops/cpu's
small @njit helpers (causal bounds, target status, the dropout hash) directly: numba compiles them for the
GPU, and the simulator runs their CPU build. ``launch.py`` sets the block, tile and grid sizes, smaller under
the simulator; ``layout.py`` reads arrays through strides (broadcasting, transposes, slices) without copies.
"""
