"""`cosim run KERNEL --model golden|tlm|rtl|all`: run one kernel or Program folder and check it.

A model that disagrees with golden gets a waveform: the TLM's timeline VCD, and for
the RTL a traced re-run of only the last :data:`FAILURE_WINDOW_CYCLES` cycles before
the run ended (DONE, an error or the watchdog), so a long run never writes a huge file;
every RTL waveform is also cut at the byte cap of ``testbench.rtl_model`` (README).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shlex
import sys
import time
from pathlib import Path
from typing import Any, Iterator

from hw.config import load_config
from hw.program import DATA_FILES, FILES
from hw.result import byte_size
from compiler.dynamic_user import one_var
from cosim import dynamic_run, models
from cosim.cli import (MAX_CYCLES, UserError, add_json_arg, claim_outputs, config_arg, config_file_of, int_arg,
                       output_arg, settle_rtl_options)
from cosim.section_report import section_report
from cosim.waves.gtkw import GtkwKept, write_gtkw
from cosim.waves.vcd_reader import WavesError

# Cycles of a failing RTL run that its waveform shows, ending where the run ended (about 2.5 KB
# of VCD per cycle on the default config when every unit is busy: some 27 MB).
FAILURE_WINDOW_CYCLES = 10_000
# The TLM's timeline VCD grows with transactions, not cycles (~250 bytes an instruction measured
# on a 24k-instruction vadd), so a failing TLM run gets one only up to this many instructions
# (about 100 MB).
TLM_FAILURE_VCD_MAX_INSNS = 400_000


def window_arg(text: str) -> tuple[int, int]:
    """``"FIRST:LAST"`` (cycles after START, at most MAX_CYCLES) for ``--waves-window``."""
    first, sep, last = text.partition(":")
    try:
        a, b = int(first, 0), int(last, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not FIRST:LAST (cycles after START, e.g. 1000:3000)") \
            from None
    if not sep or not 0 <= a <= b:
        raise argparse.ArgumentTypeError(f"'{text}': needs 0 <= FIRST <= LAST")
    if b > MAX_CYCLES:
        raise argparse.ArgumentTypeError(f"'{text}': LAST is too large (at most {MAX_CYCLES:,} cycles)")
    return a, b


positive_int = int_arg(1, MAX_CYCLES, "a positive integer")


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser("run", help="run a kernel on golden, TLM, RTL or all, and check the outputs",
                       description="Run KERNEL (an example name, path.py:function, or a Program folder) on one "
                                   "model or all of them and compare the outputs with the golden path. A model "
                                   "that disagrees gets a waveform (RTL: the last "
                                   f"{FAILURE_WINDOW_CYCLES} cycles of a traced re-run). A Program folder "
                                   "without expected.npz is run but not checked: its reports say "
                                   "'unchecked' (JSON: \"match\": null), exit 0 unless a model fails. A bare "
                                   "name (no slash) is an example even when a folder of that name is here: "
                                   "run the folder as ./NAME.")
    p.add_argument("kernel", help="example name (see `cosim list`), path.py:function, or a Program folder")
    p.add_argument("--model", choices=[*models.MODELS, "all"], default="all")
    p.add_argument("--config", type=config_arg, default=None, metavar="NAME|PATH",
                   help="hardware config: a name from hw/configs or a JSON path (default: default, or the "
                        "config a Program folder was made for)")
    p.add_argument("-p", "--param", action="append", metavar="KEY=VALUE", help="kernel parameter (repeatable)")
    p.add_argument("--set", action="append", metavar="NAME=N", dest="set_values",
                   help="value of a run-time variable of a dynamic Program or example (repeatable; see "
                        "`cosim list`)")
    p.add_argument("--var", metavar="NAME=MAX", action="append",
                   help="with --set: a dynamic example's variable in a narrower range (NAME=MAX or MIN..MAX: fewer "
                        "driver pieces), or a user kernel path.py:function's run-time variable, as cosim compile "
                        "--var takes it (-p X=NAMEx16 ...)")
    p.add_argument("--seed", type=int_arg(0), default=None,
                   help="seed of the random inputs (default 0); a static Program folder runs its own inputs.npz")
    p.add_argument("--sim", choices=["verilator", "icarus"], default=None,
                   help="RTL simulator (default verilator)")
    p.add_argument("--mem", choices=["fast", "protocol"], default=None,
                   help="RTL memory back-end (default fast)")
    p.add_argument("--waves", action="store_true",
                   help="RTL: write a VCD named after kernel, config, back-end (from reset; cut at the size cap)")
    p.add_argument("--waves-window", type=window_arg, metavar="FIRST:LAST",
                   help="RTL waves of only these cycles after START (implies --waves; also the window of a "
                        "failing run's waveform)")
    p.add_argument("--watchdog", type=positive_int, metavar="CYCLES",
                   help="RTL: report TIMEOUT after this many cycles (default: a bound computed from the Program)")
    p.add_argument("--vcd", type=output_arg, metavar="FILE", help="TLM: write the timeline VCD here")
    p.add_argument("--trace", type=output_arg, metavar="FILE",
                   help="TLM: write a Chrome/Perfetto trace JSON here (one span per section of a kernel that calls "
                        "S.section)")
    p.add_argument("--sections", action="store_true",
                   help="TLM: trace the run and print the per-section table (cycles that sum to CYCLES, MACs, DMA "
                        "bytes, busy/stall per unit; JSON: 'sections') of a kernel that calls S.section")
    add_json_arg(p)
    return p


def _options_of_absent_models(args: argparse.Namespace) -> None:
    """Refuse an option of a model that this run does not include (it would be silently ignored)."""
    if args.model == "all":
        return
    for model, given in (("tlm", [("--vcd", args.vcd), ("--trace", args.trace), ("--sections", args.sections)]),
                         ("rtl", [("--waves", args.waves), ("--waves-window", args.waves_window),
                                  ("--watchdog", args.watchdog)])):
        used = [name for name, v in given if v]
        if used and args.model != model:
            raise UserError(f"{used[0]} is an option of the {model.upper()} model, and this run is --model "
                            f"{args.model} (add --model {model} or all)")


@contextlib.contextmanager
def _tlm_outputs_named(args: argparse.Namespace) -> Iterator[None]:
    """A TLM output file that cannot be written (a full disk, a folder without write permission) is one line
    naming its option and path (the OS error of a write names no file)."""
    given = [(o, v) for o, v in (("--vcd", args.vcd), ("--trace", args.trace)) if v]
    try:
        yield
    except OSError as e:
        named = [(o, v) for o, v in given if e.filename and Path(e.filename).resolve() == Path(v).resolve()]
        if not given or (e.filename and not named):  # not an output's error: as it comes
            raise
        what = " / ".join(f"{o} {v}" for o, v in (named or given))
        raise UserError(f"{what}: cannot write ({e.strerror or e})") from None


def _outputs_spare_the_program(args: argparse.Namespace) -> None:
    """Refuse an output file that is one of the Program folder's own files or another input of the run (writing
    it would destroy it), or two outputs that name one file (the second would replace the first); make the
    outputs' folders (:func:`cosim.cli.claim_outputs`)."""
    if args.vcd and args.trace and args.vcd != os.devnull and Path(args.vcd).resolve() == Path(args.trace).resolve():
        raise UserError(f"--vcd and --trace name the same file {args.vcd} (the trace would replace the VCD)")
    if args.vcd and args.trace and Path(args.vcd).with_suffix(".gtkw").resolve() == Path(args.trace).resolve():
        raise UserError(f"--trace {args.trace} is the GTKWave save file written beside --vcd {args.vcd} "
                        "(one would replace the other)")
    folder = Path(args.kernel)
    if folder.is_dir():
        from compiler.onnx_import.imported import MODEL_FILE  # an imported folder's model (its golden re-run)

        own = {(folder / f).resolve() for f in (*FILES, *DATA_FILES, MODEL_FILE)}
        for name, value in (("--vcd", args.vcd), ("--trace", args.trace)):
            if value and Path(value).resolve() in own:
                raise UserError(f"{name} {value}: is a file of the Program folder {folder} (it would be overwritten; "
                                f"write it elsewhere)")
    inputs = [("KERNEL", args.kernel if ":" in args.kernel else None),  # a name is an example's, not a file
              ("--config", config_file_of(args.config)), *[("-p", v) for v in args.param or [] if "=@" in v]]
    claim_outputs([("--vcd", args.vcd), ("--trace", args.trace)], inputs)


def run(args: argparse.Namespace) -> int:
    _options_of_absent_models(args)
    settle_rtl_options(args, list(models.MODELS) if args.model == "all" else [args.model])
    _outputs_spare_the_program(args)
    cfg = load_config(args.config) if args.config else None
    args.var = one_var(args.var)
    user_var = args.var is not None and ":" in args.kernel and not Path(args.kernel).is_dir()
    if args.set_values or args.var is not None or dynamic_run.is_dynamic(args.kernel):
        if args.param and not user_var and not dynamic_run.is_dynamic(args.kernel):
            raise dynamic_run.DynamicRunError(f"{args.kernel}: --set is for a dynamic Program (a dynamic example, "
                                              f"a folder compiled with --var, or path.py:function with --var), and "
                                              f"this is not one")
        if args.param and not user_var:
            raise dynamic_run.DynamicRunError(f"{args.kernel}: a dynamic Program takes --set, not -p")
        job = dynamic_run.dynamic_job(args.kernel, cfg, args.set_values or [], args.seed or 0, args.var, args.param)
    else:
        if args.seed is not None and models.is_program_folder(args.kernel):  # as -p is refused there
            raise UserError(f"{args.kernel}: a Program folder runs its own inputs (inputs.npz); --seed draws the "
                            f"inputs of an example or kernel compiled by this run")
        job = models.make_job(args.kernel, cfg, args.param or [], args.seed or 0)
    cfg = job.config
    chosen = list(models.MODELS) if args.model == "all" else [args.model]
    reports = []
    table = None
    for m in chosen:
        t0 = time.perf_counter()
        if m == "golden":
            res = models.run_golden(job)
        elif m == "iss":
            res = models.run_iss(job)
        elif m == "tlm":
            with _tlm_outputs_named(args):
                if args.sections:
                    timeline = models.tlm_traced(job.program, trace=args.trace, vcd=args.vcd)
                    res, table = timeline.result, section_report(job.program, timeline)
                else:
                    res = models.run_tlm(job, vcd=args.vcd, trace=args.trace)
        else:
            res = models.run_rtl([job], mem=args.mem, simulator=args.sim,
                                 waves=args.waves or args.waves_window is not None,
                                 waves_window=args.waves_window, watchdog=args.watchdog)[0]
        if not res.wall_s:
            res.wall_s = time.perf_counter() - t0
        vcd = args.vcd if m == "tlm" else res.extra.get("vcd") if m == "rtl" else None
        if vcd and str(vcd).endswith(".vcd") and Path(vcd).is_file():
            try:
                res.extra["gtkw"] = str(write_gtkw(vcd))
            except GtkwKept as e:
                res.extra["gtkw_note"] = str(e)
            except WavesError as e:
                if not (res.extra.get("waves") or {}).get("capped"):
                    raise
                # the size cap cut the file inside its header: no signal list to save, but the run stands
                res.extra["gtkw_note"] = f"no .gtkw: the size cap cut the VCD inside its header ({e})"
        reports.append(models.judge(job, res))
        if m == "tlm" and table is not None:
            reports[-1]["sections"] = table.to_json()
    for r in reports:
        r["status"] = run_status(r)
    # match None: nothing was compared (a Program folder without expected.npz); not a failure, not a pass.
    # A golden row that only echoes expected.npz (not re-run) compares nothing and judges nothing.
    judged = [r for r in reports if r["status"] != "expected"]
    ok: bool | None = None if any(r["match"] is None for r in judged) else True
    if any(r["match"] is False for r in judged):
        ok = False
    # without a golden row, a folder's expected.npz is still checked against the re-run the others were judged by
    stale = models.stale_expected(job)
    # and without a golden row, the kernel's reference is still checked against that golden run
    ref_mm = models.run_golden(job).extra.get("mismatch") if job.reference is not None and "golden" not in chosen \
        else None
    if stale or ref_mm:
        ok = False
    timing = protocol_timing_note(reports, args.mem)
    unstored = job.program.unstored()  # the models agree on what no STORE writes: say so
    for r in reports:
        if r["match"] is False and r["model"] in ("tlm", "rtl"):
            _trace_failure(job, r, args)
    if args.json:
        out = reports[0] if len(reports) == 1 else {"kernel": job.kernel, "config": cfg.name, "match": ok,
                                                     "results": reports}
        if timing:
            out = {**out, "cycles_comparable": False, "timing_note": timing}
        if stale:
            out = {**out, "match": False, "expected_check": stale}
        if ref_mm:
            out = {**out, "match": False, "reference_check": ref_mm}
        if unstored:
            out = {**out, "unstored": {n: {"never_stored": k, "elements": e} for n, (k, e) in unstored.items()}}
        print(json.dumps(out))
    else:
        for r in reports:
            status = r["status"].upper() if r["status"] not in ("ok", "unchecked", "expected") else r["status"]
            cyc = f"{r['cycles']} cycles" if r.get("cycles") else ""
            extra = (r.get("mismatch") or (r["error"] and error_text(r["error"])) or r.get("golden")
                     or (r.get("compared") and f"compared {r['compared']}") or "")
            print(f"{job.kernel:<16} {r['model']:<7} {status:<9} {cyc:<16} {r['wall_s']:.3f} s  {extra}")
            for line in core_lines(r.get("cores") or []):
                print(f"{'':<16} {'':<7} {line}")
            note = r.get("waves_note") or (waves_note(r["waves"]) if r.get("waves") else "")
            if r.get("vcd") or note:
                print(f"{'':<16} {'':<7} waveform: {r.get('vcd') or '-'} {note}".rstrip())
            if r.get("gtkw"):
                print(f"{'':<16} {'':<7} GTKWave: gtkwave {shlex.quote(r['gtkw'])}")
            elif r.get("gtkw_note"):
                print(f"{'':<16} {'':<7} {r['gtkw_note']}")
        if table is not None:
            print("\n".join(table.table_lines()) if table.rows else
                  "(the Program has no sections: a kernel names them with S.section)")
        if timing:
            print(f"note: {timing}")
        for name, (k, e) in unstored.items():
            print(f"note: output '{name}': {k:,} of its {e:,} elements are written by no STORE of any core (they "
                  f"stay 0 on every model alike)")
    if ok is False and not args.json:
        timeouts = [r for r in reports if r["status"] == "timeout"]
        others_agree = all(r["match"] is not False for r in reports if r["model"] != "golden")
        if ref_mm:  # no golden row shows it
            print(f"cosim run: {job.kernel}: the reference does not agree with the golden run of the kernel: {ref_mm} "
                  f"(the models were checked against the golden run)", file=sys.stderr)
        if stale and others_agree:
            print(f"cosim run: {job.kernel}: {stale} (the other models were checked against the golden re-run; "
                  f"expected.npz or the inputs changed since the folder was written)", file=sys.stderr)
        elif timeouts:
            msg = str(timeouts[0]["error"].get("message") or "").split(";")[0]
            print(f"cosim run: {job.kernel}: TIMEOUT on the {timeouts[0]['model'].upper()} ({msg}); raise the bound "
                  f"with --watchdog CYCLES", file=sys.stderr)
        elif not others_agree:
            print(f"cosim run: {job.kernel} does not agree with golden", file=sys.stderr)
        elif not ref_mm:  # the golden row's own check failed
            what = ("expected.npz does not agree with the golden re-run" if models.is_program_folder(job.kernel)
                    else "the reference does not agree with the golden run of the kernel")
            print(f"cosim run: {job.kernel}: {what} (the other models were checked against the golden run)",
                  file=sys.stderr)
    return 1 if ok is False else 0


def run_status(r: dict[str, Any]) -> str:
    """One word for a model's report: ok, mismatch, error (the model stopped with an error), timeout (the
    RTL's watchdog ran out: nothing was compared), unchecked (nothing to compare with) or expected (golden of
    a Program folder it could not re-run: expected.npz, shown as it is)."""
    if r.get("golden"):
        return "expected"
    err = r.get("error")
    if err and err.get("name") == "TIMEOUT":
        return "timeout"
    if err:
        return "error"
    return {True: "ok", False: "mismatch", None: "unchecked"}[r["match"]]


def protocol_timing_note(reports: list[dict[str, Any]], mem: str) -> str:
    """Why TLM and RTL cycles of this run are not to be compared: the TLM models the fast DRAM back-end's
    timing (docs/microarch.md), the protocol back-end (cocotbext-axi) has its own latencies and
    backpressure. "" when they are comparable or not both there."""
    models_run = {r["model"] for r in reports if r.get("cycles")}
    if mem != "protocol" or not {"tlm", "rtl"} <= models_run:
        return ""
    return models.PROTOCOL_NOTE


def error_text(err: dict[str, Any]) -> str:
    """A model's error for the summary line: its name and instruction (and core, on several cores), or its
    message when it has no pc."""
    if err.get("pc") is not None:
        core = f"core {err['core']} " if err.get("core") is not None else ""
        return f"error {err.get('name')} at {core}instruction {err.get('pc')}"
    msg = str(err.get("message") or "").splitlines()
    return f"error {err.get('name')}" + (f": {msg[0]}" if msg and err.get("name") == "WAVES_CAP" else "")


def core_lines(cores: list[dict[str, Any]]) -> list[str]:
    """One line per core of a run of several cores (``extra["cores"]``): its instructions per unit, its
    DMA bytes and, from a timed model, its busy cycles per unit."""
    out = []
    for k, c in enumerate(cores):
        insns = "/".join(str(c.get(f"{u}_insns", 0)) for u in ("load", "compute", "store"))
        line = (f"core {k}: insns l/c/s {insns}, DMA rd {byte_size(int(c.get('dma_rd_bytes', 0)))} "
                f"wr {byte_size(int(c.get('dma_wr_bytes', 0)))}")
        if "load_busy" in c:
            line += ", busy l/c/s " + "/".join(str(c.get(f"{u}_busy", 0)) for u in ("load", "compute", "store"))
        out.append(line)
    return out


def waves_note(w: dict[str, Any]) -> str:
    """What an RTL waveform file holds, for the user: its cycles after START, size and the cap."""
    if w.get("from_cycle") is None:
        return "(nothing written: the run ended before the window)"
    first, last = w["from_cycle"], w["to_cycle"]
    if last < 0:  # the cap cut the file before START: only reset and the register writes are in it
        span = f"the setup before START only, up to {-last} cycles before it"
    else:
        span = f"cycles {first}..{last} after START" if first >= 0 else f"from reset to cycle {last} after START"
    cap = byte_size(int(w.get("max_bytes", 0)))
    cut = f", cut at the {cap} cap" if w.get("capped") else f", cap {cap}"
    return f"({span}, {byte_size(int(w.get('bytes', 0)))}{cut})"


def _trace_failure(job: models.Job, r: dict[str, Any], args: argparse.Namespace) -> None:
    """Attach the waveform of a failing model's run to its report ``r`` (``vcd``; RTL: ``waves``, what the
    file holds, and ``waves_note``): the one already taken, or a traced re-run (RTL: only the last
    FAILURE_WINDOW_CYCLES cycles before the run ended, or --waves-window)."""
    model = r["model"]
    if model == "tlm" and args.vcd:
        r["vcd"] = str(Path(args.vcd).resolve())
        return
    if model == "rtl" and r.get("vcd"):  # --waves: this run was traced already
        r["waves_note"] = waves_note(r.get("waves") or {})
        return
    if model == "tlm" and len(job.program.insns) > TLM_FAILURE_VCD_MAX_INSNS:
        r["waves_note"] = (f"(TLM timeline not written: {len(job.program.insns):,} instructions, over the "
                           f"{TLM_FAILURE_VCD_MAX_INSNS:,} of a bounded file)")
        return
    # beside --waves' files, under the build folder; a name a shell takes as it is (a dynamic run's is NAME[n=V])
    name = re.sub(r"[^\w.-]+", "_", f"{Path(job.kernel).name}-{job.config.name}").strip("_")
    out = models.build_root() / "mismatch" / name
    out.mkdir(parents=True, exist_ok=True)
    vcd = (out / f"{model}.vcd").resolve()
    if model == "tlm":
        models.run_tlm(job, vcd=vcd)
        r["vcd"] = str(vcd)
        return
    end = int(r.get("run_sim_cycles") or r.get("cycles") or 0)
    window = args.waves_window or (max(0, end - FAILURE_WINDOW_CYCLES), end + 16)
    # Verilator windows the trace and cuts it at the cap (both back-ends); Icarus can only stop a run
    # traced from reset, so the re-run of the same RTL is on Verilator.
    try:
        res = models.run_rtl([job], mem=args.mem, simulator="verilator", waves=True, vcd=vcd, waves_window=window,
                             watchdog=args.watchdog)[0]
    except (RuntimeError, OSError, ValueError) as e:  # the report must not hide the failure behind a second one
        r["waves_note"] = f"(the traced re-run failed: {str(e).splitlines()[0] if str(e) else type(e).__name__})"
        return
    r["vcd"] = res.extra.get("vcd")
    r["waves"] = res.extra.get("waves") or {}
    r["waves_note"] = waves_note(r["waves"])
