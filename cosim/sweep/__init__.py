"""`cosim sweep`: a design-space sweep of hardware configs x workloads on the cluster engine.

A small YAML or JSON spec (:mod:`cosim.sweep.spec`) names a base config, the parameters to vary
(a grid, or a random sample of it) and the workloads (example kernels, GEMM operators with
shapes, a shipped network). Every point (one derived config x one workload) is one engine task
(:mod:`cosim.sweep.tasks`): compile, run on the TLM, and on request the RTL; every distinct
config's area comes from synthesis (:mod:`cosim.sweep.area`, cached per config on disk). The
driver (:mod:`cosim.sweep.run`) collects the records into a table (:mod:`cosim.sweep.table`), the
Pareto front of cycles vs area per workload (:mod:`cosim.sweep.pareto`) and PNG plots
(:mod:`cosim.sweep.plots`).
"""
