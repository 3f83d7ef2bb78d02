"""`cosim run DIR --set token=N`: one value of a dynamic Program, as a Job every model runs.

The Program folder (or a dynamic example, compiled in memory) holds the Program of the maximum and its
driver (``dynamic.json``). For the value N the Python driver (:mod:`hw.dynamic_driver`) gives the
instruction words, the regions' places and sizes and the CSR writes: the Job's Program is the static
compile of N (same words, same layout), with seeded random inputs of value N and the golden outputs of
value N (the kernel called on numpy).
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from compiler.dynamic import value_meta
from compiler.dynamic_examples import (DYNAMIC_EXAMPLES, DynamicExample, DynamicNetwork, get_dynamic_example, narrowed,
                                       narrowed_to)
from compiler.dynamic_user import (META_KEY, UserDynamicExample, compile_user, from_meta, user_dynamic, var_refusal,
                                   with_roles)
from compiler.symbolic import SymbolicError
from cosim.models import Job
from hw.config import HwConfig, load_config
from hw.dynamic_driver import DRIVER_FILE, Driver, DriverError
from hw.isa import OPCODE_NAMES, IsaError, opcode_of
from hw.program import Program, ProgramError, Region, isa_of


class DynamicRunError(ValueError):
    """A bad --set (unknown, missing or out-of-range variable) or a folder that is not dynamic: one line."""


def parse_sets(items: list[str]) -> dict[str, int]:
    """``NAME=INT`` items of ``--set`` as a dict; a malformed or repeated one is one DynamicRunError line."""
    out: dict[str, int] = {}
    for it in items:
        name, sep, text = it.partition("=")
        if not sep or not name.strip() or not re.fullmatch(r"\s*-?[0-9]+\s*", text):  # decimal ASCII digits
            raise DynamicRunError(f"--set {it!r}: expected NAME=INTEGER (decimal digits)")
        value = int(text)
        if name.strip() in out:
            raise DynamicRunError(f"--set {it!r}: variable '{name.strip()}' is set twice")
        out[name.strip()] = value
    return out


def is_dynamic(kernel: str) -> bool:
    """Whether ``kernel`` names a dynamic example or a Program folder with a driver."""
    return kernel in DYNAMIC_EXAMPLES or (Path(kernel) / DRIVER_FILE).is_file()


def _load(kernel: str, cfg: HwConfig | None, var_text: str | None = None,
          params: list[str] | None = None) -> tuple[Program, Driver, DynamicExample | DynamicNetwork]:
    """The base Program, its driver and its example: a dynamic example (its range narrowed by ``var_text``)
    or a user kernel ``path.py:fn`` with ``var_text`` and ``params`` compiled in memory, or a folder."""
    ex: DynamicExample | DynamicNetwork
    folder = Path(kernel)
    if (kernel in DYNAMIC_EXAMPLES and "/" not in kernel or var_text is not None and ":" in kernel) \
            and not folder.is_dir():
        cfg = cfg or load_config("default")
        if kernel in DYNAMIC_EXAMPLES:
            ex = get_dynamic_example(kernel)
            ex = narrowed(ex, var_text) if var_text is not None else ex
            dp = ex.compile(cfg)
        else:
            ex = user_dynamic(kernel, params or [], var_text or "")
            dp = compile_user(ex, cfg)
            ex = with_roles(ex, dp.program)
        return dp.program, Driver.from_json(json.loads(json.dumps(dp.driver_json()))), ex
    if var_text is not None and folder.is_dir():
        raise DynamicRunError(f"{kernel}: a Program folder's range was fixed by cosim compile (compile it again with "
                              f"--var); --var here is for a dynamic example or a kernel path.py:function")
    if var_text is not None:
        raise DynamicRunError(var_refusal(kernel))
    if not (folder / DRIVER_FILE).is_file():
        raise DynamicRunError(f"{kernel}: not a dynamic Program (no {DRIVER_FILE}); --set needs one")
    base = Program.load(folder, cfg)
    meta = base.meta or {}
    name = meta.get("dynamic_example")
    if META_KEY in meta:  # a user kernel compiled with --var
        ex = from_meta(meta, base, str(folder / "layout.json"))
        name = ex.name
    elif not isinstance(name, str) or name not in DYNAMIC_EXAMPLES:
        raise DynamicRunError(f"{kernel}: the folder names neither a dynamic example (meta.dynamic_example) nor "
                              f"a kernel compiled with --var (meta.{META_KEY})")
    driver = Driver.load(folder)
    if META_KEY not in meta:
        ex = DYNAMIC_EXAMPLES[name]
        if driver.name == ex.var.name:  # a folder compiled with --var covers a narrower range
            ex = narrowed_to(ex, driver.lo, driver.hi, str(folder / DRIVER_FILE))
    if driver.name != ex.var.name:
        raise DynamicRunError(f"{folder / 'layout.json'}: names dynamic example '{name}' (variable "
                              f"'{ex.var.name}'), but {folder / DRIVER_FILE} drives variable '{driver.name}'")
    if META_KEY in meta and (driver.lo, driver.hi) != (ex.var.min, ex.var.max):
        raise DynamicRunError(f"{folder / 'layout.json'}: meta.{META_KEY} gives '{ex.var.name}' "
                              f"{ex.var.min}..{ex.var.max}, but {folder / DRIVER_FILE} covers {driver.lo}..{driver.hi}")
    _check_driver_fits(driver, base, folder / DRIVER_FILE)
    return base, driver, ex


def _check_driver_fits(driver: Driver, base: Program, where: Path) -> None:
    """What dynamic.json says against the folder's Program: its regions, and every relocation on the
    ``dram_base`` field of a LOAD or STORE (anything else would turn a region's address into noise)."""
    if driver.n_regions != len(base.regions):
        raise DynamicRunError(f"{where}: {driver.n_regions} regions, but layout.json has {len(base.regions)}")
    if driver.const_region is not None and base.regions[driver.const_region].role not in ("input", "scratch"):
        r = base.regions[driver.const_region]
        raise DynamicRunError(f"{where}: const_region {driver.const_region} is region '{r.name}', an {r.role} region")
    isa = base.isa
    for p in driver.pieces:
        moved = Counter(w for w, _, _, _ in p.relocs)
        for w in range(p.insns):  # the compile relocates every LOAD and STORE to its region, once
            if OPCODE_NAMES.get(opcode_of(p.base[w])) in ("LOAD", "STORE") and moved[w] != 1:
                raise DynamicRunError(f"{where}: piece {p.lo}..{p.hi}: word {w} is a "
                                      f"{OPCODE_NAMES[opcode_of(p.base[w])]} with {moved[w]} relocations "
                                      f"(one moves its DRAM address with its region's)")
        for w, r, f, _ in p.relocs:
            word = p.base[w]  # the piece's first value: its words as compiled (a base is a 128-bit word)
            mnemonic = OPCODE_NAMES.get(opcode_of(word), "?")
            if mnemonic not in ("LOAD", "STORE") or f != isa.field(mnemonic, "dram_base").lo:
                raise DynamicRunError(f"{where}: piece {p.lo}..{p.hi}: relocation [{w}, {r}, {f}, ...] is not on the "
                                      f"dram_base field of a LOAD or STORE (word {w} is {mnemonic})")


def _into_region(a: np.ndarray, r: Region) -> np.ndarray:
    """``a`` flattened at the start of region ``r``'s shape, zero-padded (the value's tensor is dense there)."""
    flat = np.zeros(int(np.prod(r.shape)), dtype=r.dtype)
    src = np.asarray(a).reshape(-1).astype(r.dtype)
    if src.size > flat.size:
        raise DynamicRunError(f"region '{r.name}': {src.size} elements do not fit its {flat.size}")
    flat[:src.size] = src
    return flat.reshape(r.shape)


def specialize(base: Program, driver: Driver, ex: DynamicExample | DynamicNetwork, v: int,
               seed: int = 0) -> tuple[Program, dict[str, Any]]:
    """The Program of value ``v`` (the driver's words in the driver's layout for ``v``, which is the static
    compile's, with inputs and expected attached) and the driver's CSR writes for it."""
    cfg = base.config
    lay = driver.layout(v)
    isa = isa_of(cfg)
    insns = [isa.decode_word(w, i) for i, w in enumerate(lay.words)]
    regions = []
    for r, addr, size in zip(base.regions, lay.bases, lay.sizes):
        item = np.dtype(r.dtype).itemsize
        if size % item:
            raise DynamicRunError(f"{base.name}: region '{r.name}' of {driver.name}={v} is {size} bytes, not whole "
                                  f"{r.dtype} elements")
        regions.append(Region(r.name, r.role, addr, (size // item,), r.dtype))
    by_name = {r.name: r for r in regions}
    inputs = ex.inputs(cfg, v, seed)
    golden = ex.golden(cfg, v, inputs)
    unknown = sorted((set(inputs) | set(golden)) - set(by_name))
    if unknown:
        raise DynamicRunError(f"{base.name}: dynamic example '{ex.name}' has tensor(s) {', '.join(unknown)} that "
                              f"the Program has no region for")
    meta = value_meta(base.meta, driver.name, v)
    const = {}
    if driver.const_region is not None:  # the kernel's constants of this value, from the driver
        r = regions[driver.const_region]
        const[r.name] = _into_region(np.frombuffer(driver.const_bytes_of(v), dtype=np.int8), r)
    prog = Program.create(cfg, insns, regions, name=base.name, meta=meta,
                          inputs={**const, **{n: _into_region(a, by_name[n]) for n, a in inputs.items()}},
                          expected={n: _into_region(a, by_name[n]) for n, a in golden.items()})
    regs = driver.regs(v)
    if regs != prog.regs:
        raise DynamicRunError(f"{base.name}: the driver's CSR writes for {driver.name}={v} differ from the "
                              f"Program's")
    return prog, {"regs": regs, "inputs": inputs}


def dynamic_job(kernel: str, cfg: HwConfig | None, sets: list[str], seed: int = 0, var_text: str | None = None,
                params: list[str] | None = None) -> Job:
    """The Job of ``kernel`` (a dynamic example or folder, or a kernel ``path.py:fn`` with ``var_text`` and
    ``params``, as ``cosim compile --var`` takes them) at the values of ``sets`` (``NAME=N``)."""
    try:
        values = parse_sets(sets)
        t0 = time.perf_counter()
        base, driver, ex = _load(kernel, cfg, var_text, params)
        v = driver.check(values)
        t1 = time.perf_counter()
        try:
            prog, made = specialize(base, driver, ex, v, seed)
        except (ProgramError, IsaError) as e:  # the words or layout the driver gave are refused: a hand-edited driver
            where = Path(kernel) / DRIVER_FILE if Path(kernel).is_dir() else kernel
            raise DynamicRunError(f"{where}: the Program it gives for {driver.name}={v} is refused: {e}") from None
    except (DriverError, SymbolicError) as e:
        raise DynamicRunError(str(e)) from None
    reference = None
    if isinstance(ex, UserDynamicExample):  # a kernel file of the user's: as a static user kernel is checked
        where = str(Path(kernel) / "layout.json") if Path(kernel).is_dir() else kernel
        ex.check_compiles_to(prog.config, v, prog, where)
        reference = ex.reference(prog.config, v, made["inputs"], prog)
    label = f"{base.name}[{driver.name}={v}]"
    return Job(kernel=label, config=prog.config, program=prog, golden=prog.expected, reference=reference,
               reference_in_user_shapes=reference is not None,
               golden_wall_s=time.perf_counter() - t1, compile_wall_s=t1 - t0,
               meta={"dynamic": {driver.name: v}})
