"""The kernel DSL, the golden (PySim) path and the compiler that turns kernels into Programs.

``from compiler import S`` gives kernel authors the intrinsics; ``compiler.build``
compiles a kernel; ``compiler.examples`` lists the registered example kernels.
"""

from compiler import dsl as S
from compiler.build import build, trace
from compiler.errors import BufferRangeError, CompileError, DeadlockError
from compiler.kernel import Kernel, kernel
from compiler.tensor import TensorSpec, tensor

__all__ = ["S", "build", "trace", "BufferRangeError", "CompileError", "DeadlockError", "Kernel", "kernel",
           "TensorSpec", "tensor"]
