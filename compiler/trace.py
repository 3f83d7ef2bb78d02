"""Tracing: running a kernel with the lowering halves to record its operations in order.

The trace keeps, per operation, the buffer entries it reads and writes (per space, see
:mod:`compiler.ir`) and the kernel's source line, and rejects a read of buffer entries
nothing wrote. It also holds what a compiled Program needs beyond the kernel's
arguments: the constants the kernel made (``S.const``: micro-op tables, identity
weights), packed into one DRAM region, and the scratch tensors it allocated
(``S.scratch``). To know what a GEMM touches it keeps the micro-op buffer's contents
(micro-ops come from constants, so they are known) and the valid bits of the micro-op
and weight buffers, and checks every GEMM with the hardware's fault rules
(:mod:`hw.gemm_numpy`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from compiler.context import Context, source_line
from compiler.errors import kernel_error
from compiler.ir import AluOp, GemmOp, Index, LoadOp, Op, SpaceAccess, StoreOp, accesses, op_name
from compiler.tensor import Tensor, pad_to_vectors
from hw.config import HwConfig
from hw.gemm_numpy import gemm_first_fault, gemm_indices
from hw.isa import INSN_BYTES, UOP_BYTES
from hw.program import align_up

CONST_REGION = "_const"  # the Program region holding every constant of a kernel


@dataclass
class Traced:
    """One recorded operation with the (space, indices) it reads and writes and its source line."""

    op: Op
    reads: SpaceAccess
    writes: SpaceAccess
    line: str


class ConstPool:
    """The constants of one kernel, packed into one int8 DRAM region (each aligned to the region
    alignment, so a LOAD into any buffer can address it in its own entries); equal constants share
    their bytes."""

    def __init__(self, align: int):
        self.align = align
        self.data = bytearray()
        self._seen: dict[tuple[str, tuple[int, ...], bytes], int] = {}
        self.count = 0

    def add(self, a: np.ndarray, lanes: int) -> int:
        """The byte offset of ``a`` (padded to whole vectors of ``lanes`` elements) in the pool."""
        key = (a.dtype.name, a.shape, a.tobytes())
        off = self._seen.get(key)
        if off is None:
            padded = pad_to_vectors(a, lanes, a.dtype).astype(a.dtype.newbyteorder("<"), copy=False)
            off = align_up(len(self.data), self.align)
            self.data += bytes(off - len(self.data)) + padded.tobytes()
            self._seen[key] = off
        self.count += 1
        return off

    @property
    def nbytes(self) -> int:
        return align_up(len(self.data), self.align)

    def array(self) -> np.ndarray:
        """The region's contents: int8, whole alignment blocks."""
        return np.frombuffer(bytes(self.data) + bytes(self.nbytes - len(self.data)), dtype=np.int8).copy()


@dataclass
class Trace:
    """A kernel's operations in program order, its tensors by name (arguments, then the scratch tensors
    it allocated) and its constants."""

    kernel: str
    ops: list[Traced] = field(default_factory=list)
    tensors: dict[str, Tensor] = field(default_factory=dict)
    consts: dict[str, object] = field(default_factory=dict)
    pool: ConstPool | None = None
    # (name, index in ``ops`` of the section's first operation): ``S.section`` marks
    sections: list[tuple[str, int]] = field(default_factory=list)


def compact(ids: np.ndarray) -> Index:
    """Sorted unique indices as a slice when they are one run (cheaper to index with), else as they are."""
    if ids.size and int(ids[-1]) - int(ids[0]) + 1 == ids.size:
        return slice(int(ids[0]), int(ids[-1]) + 1)
    return ids


def _describe(idx: Index, mask: np.ndarray) -> int:
    """The first index of ``idx`` whose ``mask`` entry is False."""
    ids = np.arange(idx.start, idx.stop) if isinstance(idx, slice) else idx
    return int(ids[~mask[ids]][0])


_PREFIX = {"ACC": "acc", "INP": "inp", "WGT": "wgt", "UOP": "uop"}


class TraceContext(Context):
    """The compile path: lowering halves call :meth:`record` (GEMM: :meth:`record_gemm`)."""

    mode = "lower"

    def __init__(self, cfg: HwConfig, kernel_name: str, trace: Trace, core_id: int = 0,
                 scratch: list[Tensor] | None = None):
        super().__init__(cfg, kernel_name)
        self.trace = trace
        self.core_id = core_id
        # several cores: the scratch tensors every core's trace shares (the k-th ``S.scratch`` of each
        # core is one tensor: the DRAM is shared), in request order; this core's requests so far
        self.scratch = scratch if scratch is not None else []
        self._scratch_calls = 0
        self.written = {b: np.zeros(cfg.depth_of(b), dtype=bool) for b in ("ACC", "INP", "WGT", "UOP")}
        if trace.pool is None:
            trace.pool = ConstPool(cfg.region_align)
        # GEMM instruction fields -> its (reads, writes), valid while the micro-op buffer is unchanged
        self._gemm_seen: dict[tuple, tuple[SpaceAccess, SpaceAccess]] = {}
        # each LOAD, STORE, ALU and GEMM becomes one instruction: past this many (FINISH after them) the
        # Program cannot fit the DRAM, so the trace stops there rather than grow without a bound
        self._insn_ops = 0
        self._insn_cap = cfg.dram_bytes // INSN_BYTES - 1

    def _check_reads(self, op: Op, reads: SpaceAccess, line: str) -> None:
        for space, r in reads:
            w = self.written[space]
            if not w[r].all():
                i = _describe(r, w)
                raise kernel_error(self.kernel_name, None, f"S.{op_name(op)} at {line} reads "
                                   f"{_PREFIX[space]}[{i}], which the kernel never wrote")

    def _append(self, op: Op, reads: SpaceAccess, writes: SpaceAccess, line: str) -> None:
        if isinstance(op, (LoadOp, StoreOp, AluOp, GemmOp)):
            self._insn_ops += 1
            if self._insn_ops > self._insn_cap:
                cfg = self.cfg
                raise kernel_error(self.kernel_name, None, f"S.{op_name(op)} at {line}: the kernel's instructions "
                                   f"outgrow the {cfg.dram_bytes}-byte DRAM of config '{cfg.name}' (at most "
                                   f"{self._insn_cap + 1:,} instructions of {INSN_BYTES} bytes, FINISH included)")
        for space, w in writes:
            self.written[space][w] = True
        self.trace.ops.append(Traced(op, reads, writes, line))

    def record(self, op: Op) -> None:
        """Append ``op``; raise CompileError if it reads buffer entries never written."""
        reads, writes = accesses(op)
        line = source_line()
        self._check_reads(op, reads, line)
        if isinstance(op, LoadOp) and op.buf in ("UOP", "WGT") and op.sram_vectors:
            self._load_state(op)
        self._append(op, reads, writes, line)

    def _load_state(self, op: LoadOp) -> None:
        """What a LOAD into the micro-op or weight buffer changes of the state the trace keeps."""
        from compiler.intrinsics import _tile_into, decode_uop_bytes

        g = self.gemm_buffers
        end = op.sram_base + op.sram_vectors
        if op.buf == "UOP":
            _tile_into(g.uops, decode_uop_bytes(op.tensor.entries((UOP_BYTES,))), op)
            g.uop_loaded[op.sram_base:end] = True
            self._gemm_seen.clear()  # what the GEMMs touch may have changed
        else:
            g.wgt_loaded[op.sram_base:end] = True

    def record_gemm(self, op: GemmOp) -> None:
        """Append a GEMM: its footprint from the micro-ops loaded; raise the hardware's fault (a micro-op
        or weight block never loaded, an index past a buffer) or a read of entries never written.

        Tiled kernels repeat the same GEMM many times over the same micro-ops: the footprint is cached
        per instruction until the micro-op buffer changes, and a GEMM that passed its checks passes them
        again (valid and written bits are only ever set)."""
        line = source_line()
        key = (op.reset, op.uop_begin, op.uop_end, op.iter_out, op.iter_in, op.acc_factor_out, op.acc_factor_in,
               op.inp_factor_out, op.inp_factor_in, op.wgt_factor_out, op.wgt_factor_in)
        hit = self._gemm_seen.get(key)
        if hit is not None:
            self._append(op, hit[0], hit[1], line)
            return
        from compiler.intrinsics import gemm_fault_error

        g = self.gemm_buffers
        u, a, x, w = gemm_indices(op, g.uops)
        fault = gemm_first_fault(op, self.cfg, u, a, x, w, g.uop_loaded, g.wgt_loaded)
        if fault is not None:
            raise gemm_fault_error(self, fault)
        reads: SpaceAccess = []
        writes: SpaceAccess = []
        if a.size:
            acc = compact(np.unique(a))
            reads = [("UOP", slice(op.uop_begin, op.uop_end))]
            if not op.reset:
                reads += [("INP", compact(np.unique(x))), ("WGT", compact(np.unique(w))), ("ACC", acc)]
            writes = [("ACC", acc)]
        self._check_reads(op, reads, line)
        self._gemm_seen[key] = (reads, writes)
        self._append(op, reads, writes, line)

    def add_const(self, data: np.ndarray, name: str) -> Tensor:
        """A constant tensor of ``data``, placed in the kernel's constant region."""
        pool = self.trace.pool
        assert pool is not None
        off = pool.add(data, self.lanes)
        return Tensor(f"{name}@{off}", data.shape, data.dtype.name, self.lanes,
                      pad_to_vectors(data, self.lanes, data.dtype), kind="const", region=CONST_REGION,
                      region_offset=off)

    def add_scratch(self, shape: tuple[int, ...], dtype: str, name: str) -> Tensor:
        """A scratch DRAM tensor of the kernel: its own region, after the arguments. On several cores,
        every core's k-th request is the tensor the first core to ask made (same name, shape, dtype)."""
        k = self._scratch_calls
        self._scratch_calls += 1
        if k < len(self.scratch):
            t = self.scratch[k]
            if (t.name, t.shape, t.dtype) != (name, shape, dtype):
                raise kernel_error(self.kernel_name, name, f"core {self.core_id}: S.scratch #{k} at {source_line()} "
                                   f"is '{name}' {dtype} {shape}, another core's is '{t.name}' {t.dtype} {t.shape} "
                                   f"(every core must allocate the same scratch tensors in the same order)")
            return t
        tensors = self.trace.tensors
        if name in tensors or name == CONST_REGION:
            raise kernel_error(self.kernel_name, name, f"S.scratch at {source_line()}: the name '{name}' is "
                               f"already used by another tensor of the kernel")
        t = Tensor(name, shape, dtype, self.lanes, kind="scratch")
        tensors[name] = t
        self.scratch.append(t)
        return t
