"""What each marked block of the docs holds: one function per figure, computed from the models.

Cheap figures (TLM and golden runs, compiler output, the ISA: seconds in all) are recomputed by
every check. Expensive ones (yosys synthesis, the example sweep with its RTL points) record the
hash of their inputs in the block (:func:`Figure.inputs`); a check compares that hash with the
current sources, and ``cosim docs --expensive`` recomputes them. A figure that needs a value
reads it through :class:`Context`, which computes each run once per invocation, so several
blocks quoting the same run agree.
"""

from __future__ import annotations

import ast
import hashlib
import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from hw.config import HwConfig, load_config

REPO = Path(__file__).resolve().parents[2]
# The shipped configs the synthesis figures cover, and the targets.
SYNTH_CONFIGS = ("small", "default", "wide")
SYNTH_TARGETS = ("generic", "ecp5")
SYNTH_TIMEOUT_S = 300.0
EXAMPLE_SWEEP = REPO / "sweeps" / "example.yaml"


def _n(v: float | int) -> str:
    """A count with thousands separators (the docs' style)."""
    return f"{v:,}"


class Context:
    """The runs the figures quote, each computed once per invocation (``progress`` logs each)."""

    def __init__(self, progress: Callable[[str], None] | None = None) -> None:
        self._memo: dict[Any, Any] = {}
        self._log = progress or (lambda _msg: None)

    def once(self, key: Any, make: Callable[[], Any]) -> Any:
        if key not in self._memo:
            self._log(f"computing {key}")
            self._memo[key] = make()
        return self._memo[key]

    # ---- cheap: TLM runs of the bench's workloads -------------------------------------------------
    def scaling_point(self, label: str, cores: int) -> dict[str, Any]:
        """One row of ``cosim bench``'s multi-core table on the TLM: cycles, port-busy cycles, MACs."""
        def make() -> dict[str, Any]:
            from cosim.bench.scaling import WORKLOADS, _traced_tlm, with_cores
            from cosim.sweep.workloads import build_workload
            w = next(w for lb, _b, w in WORKLOADS if lb == label)
            built = build_workload(w, with_cores(load_config("default"), cores), 0)
            res, busy = _traced_tlm(built.program)
            why = (f"{res.error.get('name')}" if res.error else built.check(res.outputs))
            if why:
                raise RuntimeError(f"{label} on {cores} core(s): the TLM disagrees with the golden path: {why}")
            return {"cycles": res.cycles, "port_busy": busy, "macs": built.macs}
        return self.once(("scaling", label, cores), make)

    def tlm_example(self, kernel: str, config: str) -> int:
        """The TLM cycles of an example kernel with its default parameters (outputs checked)."""
        def make() -> int:
            from cosim import models
            job = models.make_job(kernel, load_config(config))
            res = models.run_tlm(job)
            mm = models.first_mismatch(job.expected, res.outputs) if res.error is None else res.error
            if mm:
                raise RuntimeError(f"{kernel} on {config}: the TLM disagrees with the golden path: {mm}")
            return int(res.cycles)
        return self.once(("tlm", kernel, config), make)

    def digits(self) -> dict[str, Any]:
        """``cosim net digits --json`` on its whole test split (TLM, default config)."""
        def make() -> dict[str, Any]:
            from cosim.network_run import count_test_images, get_network, make_net_case, run_network
            network = get_network("digits")
            case = make_net_case(network, load_config("default"), count_test_images(network))
            rep, _sections = run_network(case, ["tlm"])
            if not rep["match"]:
                raise RuntimeError(f"digits: the TLM disagrees with the reference: {rep['mismatch']}")
            return rep
        return self.once(("net", "digits"), make)

    def digits_batch(self, config: str, images: int) -> dict[str, Any]:
        """``cosim net digits --images IMAGES --config CONFIG --json`` on golden and the TLM (both checked
        against the reference): one Program for the first ``images`` test images."""
        def make() -> dict[str, Any]:
            from cosim.network_run import get_network, make_net_case, run_network
            network = get_network("digits")
            case = make_net_case(network, load_config(config), images)
            rep, _sections = run_network(case, ["golden", "tlm"])
            if not rep["match"]:
                raise RuntimeError(f"digits ({images} images, {config}): a model disagrees with the reference: "
                                   f"{rep['mismatch']}")
            return rep
        return self.once(("net", "digits", config, images), make)

    # ---- expensive: synthesis, the example sweep ----------------------------------------------------
    def area(self, config: str, target: str) -> dict[str, Any]:
        """``cosim rtl synth --config CONFIG --target TARGET``'s totals, through the sweep's area cache."""
        def make() -> dict[str, Any]:
            from cosim.sweep import area as area_mod
            cfg = load_config(config)
            key = area_mod.area_key(cfg, target)
            hit = area_mod.cached_area(key, target)
            if hit is not None:
                return hit
            a = area_mod.synthesize_area(cfg, target, SYNTH_TIMEOUT_S)
            if a.get("status") != "ok":
                raise RuntimeError(f"synthesis of {config} on {target}: {a.get('status')}")
            area_mod.store_area(key, target, a)
            return a
        return self.once(("area", config, target), make)

    def example_sweep(self) -> dict[str, Any]:
        """``cosim sweep sweeps/example.yaml`` run afresh (areas from the synthesis cache when current)."""
        def make() -> dict[str, Any]:
            from cosim.sweep.run import run_sweep
            from cosim.sweep.spec import load_spec
            spec = load_spec(EXAMPLE_SWEEP)
            out = REPO / "build" / "docs" / "sweep-example"
            shutil.rmtree(out, ignore_errors=True)
            return run_sweep(spec, out, progress=False)
        return self.once(("sweep", "example"), make)


# ------------------------------------------------------------------------------------------ inputs
def _code_bytes(p: Path) -> bytes:
    """A file's content as a figure depends on it: Python as its syntax tree without docstrings (comments,
    layout and docs edits leave the recorded hash alone), anything else as written."""
    if p.suffix != ".py":
        return p.read_bytes()
    try:
        tree = ast.parse(p.read_bytes(), filename=str(p))
    except SyntaxError:
        return p.read_bytes()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body
                and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree).encode()


def _files_hash(paths: list[Path], extra: str = "") -> str:
    h = hashlib.sha256(extra.encode())
    for p in sorted(set(paths)):
        h.update(str(p.relative_to(REPO)).encode() + b"\0" + _code_bytes(p) + b"\0")
    return h.hexdigest()[:16]


def _py_files(*folders: str) -> list[Path]:
    return [p for f in folders for p in (REPO / f).rglob("*.py") if "__pycache__" not in p.parts]


def synth_inputs() -> str:
    """What every synthesis figure depends on: the area cache's key of each config x target (RTL
    sources, ``hw/synth.py``, yosys' version, the config's numbers)."""
    from cosim.sweep.area import area_key
    keys = [area_key(load_config(c), t) for c in SYNTH_CONFIGS for t in SYNTH_TARGETS]
    return hashlib.sha256("|".join(keys).encode()).hexdigest()[:16]


def sweep_inputs() -> str:
    """What the example sweep's figures depend on: its spec, its configs' areas (as
    :func:`synth_inputs`), the compiler, the TLM, the hardware definitions, the RTL and its testbench."""
    from hw.introspect.parse import RTL_DIR, source_files
    tb = REPO / "testbench"
    files = [EXAMPLE_SWEEP, *source_files(RTL_DIR), *(tb / "hdl").iterdir(), REPO / "cosim" / "models.py",
             *(tb / n for n in ("rtl_model.py", "cocotb_job.py", "memimg.py")),
             *_py_files("hw", "compiler", "sim", "cosim/sweep"), *(REPO / "hw" / "configs").glob("*.json")]
    from hw import synth
    files += [Path(synth.__file__)]
    return _files_hash([f.resolve() for f in files], extra=synth_inputs())


# ------------------------------------------------------------------------------------------ figures
@dataclass(frozen=True)
class Figure:
    """One marked block's generator: ``make(ctx)`` gives its text; an expensive figure has ``inputs``."""

    name: str
    make: Callable[[Context], str]
    inputs: Callable[[], str] | None = None  # None: cheap, recomputed by every check
    command: str = "cosim docs"

    @property
    def expensive(self) -> bool:
        return self.inputs is not None


def _alu_ops(_ctx: Context) -> str:
    from hw.isa import ALU_OPS
    return " ".join(sorted(ALU_OPS, key=lambda n: ALU_OPS[n]))


def _configs(_ctx: Context) -> str:
    from hw.config import list_configs, load_config
    return "; ".join(f"`{n}`: {load_config(n).description}" for n in list_configs())


def _csr_version(_ctx: Context) -> str:
    """The VERSION register's value as the header generator writes it into the RTL."""
    import re

    from hw.config import load_config
    from hw.gen_header import header_text
    m = re.search(r"CFG_VERSION\s+32'h([0-9a-fA-F]{8})", header_text(load_config("default")))
    if m is None:
        raise ValueError("hw/gen_header.py writes no CFG_VERSION")
    v = int(m.group(1), 16)
    return f"0x{v >> 16:04X}_{v & 0xFFFF:04X} (major {v >> 8 & 0xFF}, minor {v & 0xFF})"


def _fuzz_catalogue(_ctx: Context) -> str:
    from collections import Counter

    from cosim.fuzz.bins import catalogue, unreachable
    cfgs = [load_config(n) for n in ("default", "small", "wide")]
    bins, never = catalogue(cfgs), unreachable(cfgs)
    groups = Counter(b.split(".")[0] for b in bins)
    out = Counter(b.split(".")[0] for b in never)
    per = ", ".join(f"`{g}` {groups[g] - out[g]}" for g in groups)
    return (f"The catalogue of a campaign on default, small and wide has {len(bins)} bins today: "
            f"{len(bins) - len(never)} reachable ({per}) and {len(never)} unreachable (the list above)")


def _resnet_default(ctx: Context) -> str:
    p = ctx.scaling_point("resnet_layer", 1)
    peak = load_config("default").macs_per_cycle
    mpc = p["macs"] / p["cycles"]
    return (f"The ResNet-18 layer (`conv2d_resnet`, {p['macs'] / 1e6:.1f} M MACs) takes {_n(p['cycles'])} cycles "
            f"on `default`: {mpc:.0f} MACs per cycle of the {peak} peak, **{100 * mpc / peak:.1f} %**")


def _multicore_cycles(ctx: Context) -> str:
    one = ctx.scaling_point("resnet_layer", 1)
    quad = ctx.tlm_example("conv2d_resnet", "quad")
    q = load_config("quad")
    rif, wif = q.dram_reads_in_flight, q.dram_writes_in_flight
    return (f"`cosim run vadd --config quad --model all` gives {_n(ctx.tlm_example('vadd', 'quad'))} cycles on the "
            f"TLM, the ResNet-18 layer (`conv2d_resnet`) {_n(quad)} on `quad` ({rif} read and {wif} write bursts "
            f"in flight; "
            f"{_n(one['cycles'])} on one core: {one['cycles'] / quad:.1f}x)")


def _multicore_scaling(ctx: Context) -> str:
    def sp(label: str, n: int) -> float:
        return ctx.scaling_point(label, 1)["cycles"] / ctx.scaling_point(label, n)["cycles"]
    r4 = ctx.scaling_point("resnet_layer", 4)
    return (f"the ResNet-18 layer {sp('resnet_layer', 2):.2f}x on 2 cores and {sp('resnet_layer', 4):.2f}x on 4, "
            f"where the one port is {100 * r4['port_busy'] / r4['cycles']:.0f} % busy; a 256^3 GEMM "
            f"{sp('gemm_256', 4):.2f}x and the 128k-element add {sp('vadd_128k', 4):.2f}x on 4")


def _digits(ctx: Context) -> str:
    d = ctx.digits()
    acc = d["accuracy"]
    if len({round(v, 12) for v in acc.values()}) != 1:
        raise RuntimeError(f"digits: the accuracies differ between float and int8: {acc}")
    return (f"{100 * acc['tlm']:.2f} % on the {d['images']} test images as float and as int8; "
            f"{_n(d['cycles']['tlm'])} cycles for the whole split on the default config "
            f"({_n(int(d['cycles']['per_image']))} per image)")


# The small batch of the digits network the several-core figures quote (fewer images than the
# whole split, so the cores' barriers between layers weigh more).
DIGITS_SMALL_BATCH = 8


def _examples() -> list[str]:
    from compiler.examples import list_examples
    return [e if isinstance(e, str) else e.name for e in list_examples()]


def _quad_examples(ctx: Context) -> str:
    """Every example's TLM cycles on one core (``default``) and on ``quad`` (the same core four times)."""
    rows = ["| example | one core | `quad` | `quad` ÷ one core |", "|---|---:|---:|---:|"]
    for name in _examples():
        one, quad = ctx.tlm_example(name, "default"), ctx.tlm_example(name, "quad")
        rows.append(f"| {name} | {_n(one)} | {_n(quad)} | {quad / one:.2f} |")
    return "\n" + "\n".join(rows) + "\n"


def _quad_summary(ctx: Context) -> str:
    """How many examples are faster, equal and slower on ``quad``, and the digits small batch per image."""
    pairs = [(ctx.tlm_example(n, "default"), ctx.tlm_example(n, "quad")) for n in _examples()]
    faster = sum(q < o for o, q in pairs)
    equal = sum(q == o for o, q in pairs)
    slower = len(pairs) - faster - equal
    one = ctx.digits_batch("default", DIGITS_SMALL_BATCH)["cycles"]["per_image"]
    quad = ctx.digits_batch("quad", DIGITS_SMALL_BATCH)["cycles"]["per_image"]
    return (f"of the {len(pairs)} examples {faster} take fewer cycles on `quad` than on one core, {equal} as many "
            f"and {slower} more (worst `quad` ÷ one core {max(q / o for o, q in pairs):.2f}); the digits CNN on "
            f"{DIGITS_SMALL_BATCH} images {_n(round(quad))} cycles per image on `quad` against {_n(round(one))} on "
            f"one core")


def _synth_readme(ctx: Context) -> str:
    parts = []
    for c in SYNTH_CONFIGS:
        a = ctx.area(c, "ecp5")
        nums = f"{_n(a['ffs'])} / {_n(a['luts'])} / {_n(a['brams'])}"
        parts.append(f"`{c}` {nums}" if parts else
                     f"`{c}` on ECP5 is {_n(a['ffs'])} flip-flops, {_n(a['luts'])} LUT4 and {_n(a['brams'])} DP16KD")
    return ", ".join(parts[:-1]) + " and " + parts[-1]


def _synth_table(ctx: Context) -> str:
    rows = ["| config | target | cells | FFs | LUTs | BRAM | LUT RAMs | multipliers | memory bits | latches |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    for c in SYNTH_CONFIGS:
        for t in SYNTH_TARGETS:
            a = ctx.area(c, t)
            luts = "–" if a.get("luts") is None else _n(a["luts"])
            lutrams = _n(a["lutrams"]) if t != "generic" else "–"
            rows.append(f"| {c} | {t} | {_n(a['cells'])} | {_n(a['ffs'])} | {luts} | {_n(a['brams'])} | {lutrams} | "
                        f"{_n(a['multipliers'])} | {_n(a['memory_bits'])} | {_n(a['latches'])} |")
    return "\n" + "\n".join(rows) + "\n"


def ff_bound_terms(cfg: HwConfig) -> dict[str, int]:
    """The terms of the flip-flop bound that tests/test_synth.py checks the design against: a fifth
    of the accumulator buffer's bits, the CSR region registers, GEMM's loaded flags."""
    return {"acc_fifth": cfg.acc_depth * cfg.lanes * cfg.acc_width // 5,
            "regions": cfg.max_regions * (32 + 32 + 2), "loaded_flags": cfg.uop_depth + cfg.wgt_depth}


def _ff_bound(ctx: Context) -> str:
    out = []
    for c in ("small", "default"):
        terms = ff_bound_terms(load_config(c))
        out.append(f"{' + '.join(_n(v) for v in terms.values())} = {_n(sum(terms.values()))} (measured: "
                   f"{_n(ctx.area(c, 'generic')['ffs'])})")
    return f"On `small` that is {out[0]}; on `default` {out[1]}"


def _params_text(params: dict[str, Any]) -> str:
    return ", ".join(f"{k} {json.dumps(v, sort_keys=True) if isinstance(v, dict) else v}" for k, v in params.items())


def _sweep_example(ctx: Context) -> str:
    rep = ctx.example_sweep()
    c, r = rep["counts"], rep["rtl"]
    metric = rep["area_metric"]
    lines = [f"{c['configs']} configs ({c['invalid_configs']} invalid) x {len(rep['workloads'])} workloads = "
             f"{c['points']} points: {c['ok']} ok, {c['invalid']} invalid, {c['failed']} failed; "
             f"{c['rtl_points']} points also on the RTL ({r.get('configs', '?')} configs on "
             f"{r.get('builds', '?')} simulator build(s)), "
             + ("the RTL and the TLM equal cycle for cycle and counter for counter."
                if c["tlm_differs_from_rtl"] == 0 else f"{c['tlm_differs_from_rtl']} differ from the TLM."),
             "", f"| workload | front (cycles @ {metric} on {rep['area_target']}) | best cycles x area |",
             "|---|---|---|"]
    for label in rep["workloads"]:
        front = rep["fronts"].get(label) or []
        cells = " · ".join(f"{_n(p['tlm_cycles'])} @ {_n(round(p['area']))}"
                           + ("" if p["config"].startswith("sweep-") else f" (`{p['config']}`)") for p in front)
        best = (rep.get("best") or {}).get(label, {}).get("best_cycles_x_area")
        lines.append(f"| {label} | {cells} | {_params_text(best['params']) if best else '–'} |")
    return "\n" + "\n".join(lines) + "\n"


FIGURES: dict[str, Figure] = {f.name: f for f in [
    Figure("alu-ops", _alu_ops),
    Figure("configs", _configs),
    Figure("csr-version", _csr_version),
    Figure("fuzz-catalogue", _fuzz_catalogue),
    Figure("resnet-default", _resnet_default),
    Figure("multicore-cycles", _multicore_cycles),
    Figure("multicore-scaling", _multicore_scaling),
    Figure("digits", _digits),
    Figure("quad-examples", _quad_examples),
    Figure("quad-summary", _quad_summary),
    Figure("synth-readme", _synth_readme, synth_inputs, "cosim docs --expensive"),
    Figure("synth-table", _synth_table, synth_inputs, "cosim docs --expensive"),
    Figure("synth-ff-bound", _ff_bound, synth_inputs, "cosim docs --expensive"),
    Figure("sweep-example", _sweep_example, sweep_inputs, "cosim docs --expensive"),
]}


def pages() -> list[Path]:
    """The pages whose blocks the generator owns: README.md and docs/*.md."""
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]

