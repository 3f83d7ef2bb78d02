"""The compiler: kernel + argument shapes/dtypes + config -> :class:`hw.program.Program`.

``build`` traces the kernel (lowering halves), derives each tensor's role from use
(loaded only: input; stored only: output; both, or allocated by ``S.scratch``: scratch;
the kernel's constants share one input region, filled by the compiler), inserts dependency tokens
(:mod:`compiler.deps`), plans the DRAM layout (:func:`hw.program.plan_layout`:
instructions first, then the tensors in parameter order, each aligned, none
overlapping), resolves DRAM addresses, proves the stream (FINISH last, balanced
tokens, every conflict ordered, no deadlock under the config's queue depths) and
returns the Program with its register config. On a config of several cores it does this per
core (:func:`trace_cores`: one trace per core, one layout) and the Program holds one stream per core.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping, Sequence
from typing import Any


from compiler.context import active
from compiler.deps import Node, check_dependences, insert_tokens
from compiler.errors import CompileError, KernelFailure, kernel_error, on_core
from compiler.ir import AluOp, GemmOp, LoadOp, StoreOp
from compiler.kernel import Kernel, as_kernel, reporting_failures
from compiler.tensor import Tensor
from compiler.trace import CONST_REGION, Trace, TraceContext
from compiler.verify import verify_program
from hw.config import HwConfig, load_config
from hw.isa import ALU_OPS, BUFFERS, INSN_BYTES, Alu, Barrier, Finish, Gemm, Instruction, Load, Store
from hw.program import Program, ProgramError, Region, align_up, concat_streams, plan_layout


def _config(cfg: HwConfig | str) -> HwConfig:
    return cfg if isinstance(cfg, HwConfig) else load_config(cfg)


def trace(kernel: Any, args: Sequence[Any] | Mapping[str, Any], cfg: HwConfig | str, name: str | None = None,
          **consts: Any) -> Trace:
    """Run ``kernel`` with the lowering halves; ``args`` are TensorSpecs/arrays and constants.

    ``name`` (default: the function's name) is the kernel name errors report. On a config of several
    cores this is core 0's trace (:func:`trace_cores` gives every core's).
    """
    return trace_cores(kernel, args, _config(cfg), name, cores=1, **consts)[0]


def trace_cores(kernel: Any, args: Sequence[Any] | Mapping[str, Any], cfg: HwConfig, name: str | None = None,
                cores: int | None = None, **consts: Any) -> list[Trace]:
    """One trace per core (``cores``, default the config's ``num_cores``): the kernel run once per core
    with ``S.core_id()`` = k, on the SAME tensors (the DRAM is shared), every core's k-th ``S.scratch``
    one tensor and one constant pool for all, so every core's stream addresses one layout. The traces
    share their ``tensors`` dict and ``pool``."""
    k = as_kernel(kernel)
    name = name or k.name
    bound = k.bind(args, consts)
    tensors = k.make_tensors(bound, cfg, golden=False)
    if CONST_REGION in tensors:
        raise kernel_error(name, CONST_REGION, "this name is reserved for the kernel's constants")
    values = {n: v for n, v in bound.items() if n not in tensors}
    n = cfg.num_cores if cores is None else cores
    first = Trace(name, tensors=tensors, consts=values)
    check_sizes(first, cfg, 0)  # fail fast, before running the kernel, on tensors that cannot fit
    traces: list[Trace] = []
    scratch: list[Tensor] = []
    for core in range(n):
        tr = first if core == 0 else Trace(name, tensors=tensors, consts=values, pool=first.pool)
        try:
            # on several cores the failing core's file and line are named here (one core: by the caller)
            with active(TraceContext(cfg, name, tr, core_id=core, scratch=scratch)), \
                    reporting_failures(k.fn, f"kernel '{name}'") if n > 1 else contextlib.nullcontext():
                k.fn(**bound)
        except CompileError as e:
            if n == 1:
                raise
            raise on_core(e, name, core) from (e.__cause__ if isinstance(e, KernelFailure) else e)
        traces.append(tr)
    return traces


def roles(tr: Trace) -> dict[str, str]:
    """Region role of every tensor argument, from how the kernel used it."""
    out = {}
    for name, t in tr.tensors.items():
        if (t.loaded and t.stored) or t.kind == "scratch":
            out[name] = "scratch"
        elif t.loaded:
            out[name] = "input"
        elif t.stored:
            out[name] = "output"
        else:
            raise kernel_error(tr.kernel, name, "the kernel never loads or stores this tensor")
    return out


def _region_specs(tr: Trace) -> list[tuple[str, int, str]]:
    """(name, bytes, what) of every data region: the tensors in parameter order, then the constants."""
    out = [(name, t.nbytes, f"{t.dtype} {t.shape}") for name, t in tr.tensors.items()]
    if tr.pool is not None and tr.pool.count:
        out.append((CONST_REGION, tr.pool.nbytes, "the kernel's constants"))
    return out


def check_sizes(tr: Trace, cfg: HwConfig, insn_count: int) -> None:
    """One-line errors naming the argument that does not fit the DRAM or the region slots."""
    specs = _region_specs(tr)
    if 1 + len(specs) > cfg.max_regions:
        what = f"{len(tr.tensors)} tensors" + (" and the constants" if len(specs) > len(tr.tensors) else "")
        raise kernel_error(tr.kernel, None, f"{what} need {1 + len(specs)} DRAM regions, "
                           f"config '{cfg.name}' has {cfg.max_regions} region slots")
    end = align_up(insn_count * INSN_BYTES, cfg.region_align)
    for name, nbytes, what in specs:
        if end + nbytes > cfg.dram_bytes:
            raise kernel_error(tr.kernel, name, f"tensor of {nbytes} bytes ({what}) does not fit the "
                               f"{cfg.dram_bytes}-byte DRAM of config '{cfg.name}' ({end} bytes already used by "
                               f"instructions and earlier tensors)")
        end = align_up(end + nbytes, cfg.region_align)


def layout(tr: Trace, cfg: HwConfig, insn_count: int) -> list[Region]:
    """Plan the DRAM regions: instructions, then the tensors in parameter order."""
    role = roles(tr)
    check_sizes(tr, cfg, insn_count)
    specs = [(name, role[name], t.region_shape, t.dtype) for name, t in tr.tensors.items()]
    if tr.pool is not None and tr.pool.count:
        specs.append((CONST_REGION, "input", (tr.pool.nbytes,), "int8"))
    try:
        return plan_layout(cfg, specs, insn_count)
    except ProgramError as e:
        raise kernel_error(tr.kernel, None, str(e)) from None


def to_insn(n: Node, regions: dict[str, Region], cfg: HwConfig) -> Instruction:
    """The ISA instruction of a scheduled node, with DRAM bases resolved against the layout."""
    op = n.op
    if n.kind == "finish" or op is None:
        return Finish(**n.flags)
    if n.kind == "barrier":
        return Barrier(**n.flags)
    if isinstance(op, LoadOp):
        y0, y1, x0, x1 = op.pad
        start = regions[op.tensor.region].addr + op.tensor.region_offset  # aligned to every buffer's entry
        return Load(**n.flags, buf=BUFFERS[op.buf], sram_base=op.sram_base,
                    dram_base=start // cfg.elem_bytes(op.buf) + op.offset,
                    y_size=op.rows, x_size=op.cols, x_stride=op.stride,
                    y_pad_0=y0, y_pad_1=y1, x_pad_0=x0, x_pad_1=x1)
    if isinstance(op, StoreOp):
        return Store(**n.flags, buf=BUFFERS["ACC"], sram_base=op.sram_base,
                     dram_base=(regions[op.tensor.region].addr + op.tensor.region_offset) // cfg.out_vec_bytes
                     + op.offset,
                     y_size=op.rows, x_size=op.cols, x_stride=op.stride)
    if isinstance(op, AluOp):
        return Alu(**n.flags, alu_op=ALU_OPS[op.op], use_imm=op.imm is not None, iter_out=op.iter_out,
                   iter_in=op.iter_in, dst_base=op.dst_base, src_base=op.src_base,
                   dst_factor_out=op.dst_factor_out, dst_factor_in=op.dst_factor_in,
                   src_factor_out=op.src_factor_out, src_factor_in=op.src_factor_in,
                   imm=op.imm if op.imm is not None else 0)
    if isinstance(op, GemmOp):
        return Gemm(**n.flags, reset=op.reset, uop_begin=op.uop_begin, uop_end=op.uop_end, iter_out=op.iter_out,
                    iter_in=op.iter_in, acc_factor_out=op.acc_factor_out, acc_factor_in=op.acc_factor_in,
                    inp_factor_out=op.inp_factor_out, inp_factor_in=op.inp_factor_in,
                    wgt_factor_out=op.wgt_factor_out, wgt_factor_in=op.wgt_factor_in)
    raise CompileError(f"cannot lower {op!r}")


def build(kernel: Kernel | Any, args: Sequence[Any] | Mapping[str, Any], cfg: HwConfig | str = "default",
          name: str | None = None, **consts: Any) -> Program:
    """Compile ``kernel`` for ``cfg`` into a Program.

    ``name`` names the Program and the kernel in errors (default: the function's name).
    ``args`` gives the kernel's arguments, positionally or by name: a
    :class:`compiler.tensor.TensorSpec` (``S.tensor(shape, dtype)``) or a numpy array
    (its shape and dtype) for each DRAM tensor, any other value for a compile-time
    constant; ``consts`` are more keyword arguments. Raises CompileError (one line:
    kernel, argument, reason) when the kernel cannot be compiled.

    On a config of several cores the kernel is traced once per core (:func:`trace_cores`) and each
    core's trace becomes its own instruction stream (tokens, ``S.barrier()`` as the BARRIER
    instruction, FINISH last), proved on its own; the Program holds the streams in core order with
    one window per core (:func:`hw.program.concat_streams`).
    """
    cfg = _config(cfg)
    traces = trace_cores(kernel, args, cfg, name, **consts)
    tr = traces[0]
    if not any(t.ops for t in traces):
        raise kernel_error(tr.kernel, None, "the kernel issues no instructions")
    roles(tr)  # fail on unused tensors before scheduling
    many = len(traces) > 1
    starts: list[list[int]] = [[] for _ in traces]
    nodes = [insert_tokens(t, cfg, st) for t, st in zip(traces, starts)]
    regions = layout(tr, cfg, sum(len(ns) for ns in nodes))
    by_name = {r.name: r for r in regions}
    streams = [[to_insn(n, by_name, cfg) for n in ns] for ns in nodes]
    for core, (t, ns, insns) in enumerate(zip(traces, nodes, streams)):
        where = f"kernel '{tr.kernel}'" + (f" core {core}" if many else "")
        verify_program(insns, cfg, where)
        check_dependences(t, ns, insns, cfg)
    meta = {"kernel": tr.kernel, "source": kernel_source(as_kernel(kernel)),
            "args": {n: {"shape": list(t.shape), "dtype": t.dtype} for n, t in tr.tensors.items() if t.kind == "arg"},
            "consts": {n: _jsonable(v) for n, v in tr.consts.items()}}
    if any(t.sections for t in traces):
        per_core = [sections(t.sections, st, len(ns)) for t, st, ns in zip(traces, starts, nodes)]
        # meta["sections"]: core 0's (its window starts at 0: pcs and flat indices agree); several cores
        # also list every core's, pcs counted per core, in meta["core_sections"]
        meta["sections"] = per_core[0]
        if many:
            meta["core_sections"] = per_core
    inputs = {CONST_REGION: tr.pool.array()} if tr.pool is not None and tr.pool.count else {}
    insns, windows = concat_streams(streams) if many else (streams[0], None)
    try:
        return Program.create(cfg, insns, regions, name=tr.kernel, meta=meta, inputs=inputs, windows=windows)
    except (ProgramError, ValueError) as e:
        raise kernel_error(tr.kernel, None, str(e).splitlines()[0]) from None


def sections(marks: list[tuple[str, int]], starts: list[int], insn_count: int) -> list[dict[str, Any]]:
    """The Program's named sections (``S.section``): ``name``, ``first`` instruction and ``count``, in
    order; a section runs to the next one's first instruction, the last one to FINISH (excluded)."""
    firsts = [starts[k] if k < len(starts) else insn_count - 1 for _, k in marks]
    ends = firsts[1:] + [insn_count - 1]
    return [{"name": name, "first": f, "count": e - f} for (name, _), f, e in zip(marks, firsts, ends)]


def kernel_source(k: Kernel) -> str:
    """Where the kernel's function lives, so a saved Program can run its golden path again:
    ``package.module:function`` for a kernel of an importable package, else ``/abs/file.py:function``."""
    fn = k.fn
    mod = getattr(fn, "__module__", "") or ""
    if mod and not mod.startswith("_") and mod != "__main__":
        return f"{mod}:{fn.__name__}"
    return f"{os.path.abspath(fn.__code__.co_filename)}:{fn.__name__}"


def _jsonable(v: Any) -> Any:
    if isinstance(v, (bool, int, float, str)) or v is None:
        return v
    if isinstance(v, (tuple, list)):
        return [_jsonable(x) for x in v]
    return repr(v)
