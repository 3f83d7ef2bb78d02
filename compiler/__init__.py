"""The kernel DSL, the golden (PySim) path and the compiler that turns kernels into Programs."""
