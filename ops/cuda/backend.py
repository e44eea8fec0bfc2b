"""The CUDA Backend: the kernels of this package's modules, on numba.cuda device arrays (imported only when
"cuda" is first used: ops.backend("cuda"))."""
import ops.cuda
from ops._cuda import is_device_array, to_device, to_host
from ops.backend import Backend, kernel_table
from ops.cuda.elementwise import full

BACKEND = Backend("cuda", kernel_table(ops.cuda), put=to_device, get=to_host, owns=is_device_array,
                  zeros_like=lambda a: full(a.shape, 0, a.dtype))
