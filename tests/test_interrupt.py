"""Ctrl-C at many moments of `cosim fuzz`, `cosim regress` and `cosim sweep`, on a machine whose cores are busy.

Each run is a real `cosim` process in a session of its own; Ctrl-C is what a terminal sends, a SIGINT
to the whole process group (the `cosim` process and every process it started there). For every moment:

* exit code 130 and exactly the line ``cosim <cmd>: interrupted`` on stderr (sweep: its own progress lines
  before it, nothing else): no traceback, nothing from Dask, distributed, tornado or a worker;
* the results file exists and every line is a whole JSON record, each key once;
* no process the run started is left (each run carries a tag in its environment, which every process it
  starts inherits: the embedded cluster's workers, their task processes, the simulators).

The moments go from the first instant of cosim's own code (importing the commands) through the cluster's
start, the first record, mid-run, to the close after the last record. While they run, one busy-loop
process per core keeps the CPUs loaded (a flaky Ctrl-C showed only on a loaded machine).
``COSIM_INTERRUPT_SOAK=1`` adds the moments both workers are spawned and a first task runs, and a spread
of fixed delays (0.25 to 12 s in steps of 0.25 s): about 15 minutes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Callable

import psutil
import pytest

from tests.test_cluster import dask_cluster  # noqa: F401 - the fixture: a scheduler and two workers

REPO = Path(__file__).resolve().parents[1]
COSIM = [sys.executable, "-m", "cosim.cli"]
SOAK = os.environ.get("COSIM_INTERRUPT_SOAK", "") not in ("", "0")
# A busy-loop process ends by itself after this long, whatever happens to the test.
LOAD_LIMIT_S = 600


@pytest.fixture
def cpu_load():
    """One busy-loop process per core for the test's duration (each bounded by LOAD_LIMIT_S, killed at the end)."""
    loop = f"import time\nend = time.monotonic() + {LOAD_LIMIT_S}\nwhile time.monotonic() < end:\n    pass\n"
    procs = [subprocess.Popen([sys.executable, "-c", loop]) for _ in range(os.cpu_count() or 1)]
    try:
        yield len(procs)
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()


def _tagged(tag: str) -> list[psutil.Process]:
    """The live processes whose environment carries ``COSIM_TEST_RUN=tag`` (zombies do not count)."""
    out = []
    for p in psutil.process_iter():
        try:
            if p.environ().get("COSIM_TEST_RUN") == tag and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
        except (psutil.Error, OSError):
            continue
    return out


def _cmdline(p: psutil.Process) -> list[str]:
    """``p``'s command line, or [] once it has ended (it may, between its listing and this call)."""
    try:
        return p.cmdline()
    except psutil.Error:
        return []


def _cosim_code_runs(pid: int) -> bool:
    """Whether cosim's own code runs in ``pid``: numpy is mapped, which only `cosim.cli.main` imports (while it
    builds the parser). Before that the interpreter starts, and a Ctrl-C there is Python's own business."""
    try:
        return "_multiarray_umath" in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


# A moment: (name, a function of (results file, seconds since cosim's code started, the cosim process) that
# says "now").
Moment = tuple[str, Callable[[Path, float, psutil.Process], bool]]


def after(seconds: float) -> Moment:
    return f"{seconds:g}s", lambda results, t, proc: t >= seconds


def records(n: int, name: str = "") -> Moment:
    return name or f"{n} record(s)", lambda results, t, proc: _lines(results) >= n


def _count(proc: psutil.Process, what: str) -> int:
    """How many processes below ``proc`` have ``what`` in their command line."""
    n = 0
    for c in proc.children(recursive=True):
        try:
            n += what in " ".join(c.cmdline())
        except psutil.Error:
            continue
    return n


def spawned(what: str, n: int, name: str) -> Moment:
    """When ``n`` processes below the cosim process have ``what`` in their command line."""
    return name, lambda results, t, proc: _count(proc, what) >= n


def interrupt(cmd: list[str], results: Path, moment: Moment, env: dict[str, str] | None = None,
              limit_s: float = 120.0, sig: int = signal.SIGINT,
              group: bool = True) -> tuple[int | None, str, str, bool]:
    """Run ``cmd``, send SIGINT (or ``sig``) to its process group (or, not ``group``, to the cosim process
    alone) at ``moment``; (exit code, stdout, stderr, whether the signal was sent before the process ended).
    Fails the test if a process of the run outlives it."""
    tag = uuid.uuid4().hex
    run_env = {**os.environ, **(env or {}), "COSIM_TEST_RUN": tag}
    # the signal disposition a terminal gives its jobs (pytest's own handler must not be inherited)
    run = subprocess.Popen(cmd, cwd=REPO, env=run_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    sent = False
    try:
        t_start = time.monotonic()
        while not _cosim_code_runs(run.pid) and run.poll() is None and time.monotonic() - t_start < limit_s:
            time.sleep(0.005)
        t0 = time.monotonic()
        proc = psutil.Process(run.pid)
        while run.poll() is None and time.monotonic() - t0 < limit_s:
            if moment[1](results, time.monotonic() - t0, proc):
                (os.killpg if group else os.kill)(run.pid, sig)
                sent = True
                break
            time.sleep(0.01)
        t_sent = time.monotonic()
        out, err = run.communicate(timeout=limit_s)
        stop_s = time.monotonic() - t_sent
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait()
    deadline = time.monotonic() + 15  # the task processes end on their parent's death: give them a moment
    while _tagged(tag) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [(p.pid, _cmdline(p)[:4]) for p in _tagged(tag)]
    for p in _tagged(tag):
        p.kill()
    assert not left, f"{moment[0]}: processes left behind: {left}"
    assert stop_s < 60, f"{moment[0]}: {stop_s:.1f} s from Ctrl-C to the end"
    print(f"{cmd[3]} at {moment[0]}: {stop_s:.1f} s from the moment to the end")
    return run.returncode, out, err, sent


def check_results(results: Path) -> list[dict]:
    """Every line of the results file is a whole record, each key once (no file: stopped before the engine)."""
    if not results.exists():
        return []
    recs = [json.loads(line) for line in results.read_text().splitlines()]
    assert all(isinstance(r, dict) and isinstance(r.get("key"), str) and "ok" in r for r in recs)
    assert len({r["key"] for r in recs}) == len(recs)
    return recs


def check_interrupted(command: str, moment: Moment, code: int | None, err: str, sent: bool,
                      own_lines: Callable[[str], bool] = lambda line: False) -> bool:
    """Exit 130 and the one `interrupted` line (after lines the command writes itself, ``own_lines``): True.
    Or the run was over (the moment came after the process ended, or while it was exiting, its work done
    and printed: a Ctrl-C then is ignored): exit 0 or 1 with only its own lines: False."""
    lines = err.splitlines()
    if not sent or code in (0, 1):
        assert code in (0, 1) and not [x for x in lines if not own_lines(x)], (moment[0], code, err)
        return False
    assert code == 130, (moment[0], code, err)
    assert lines and lines[-1] == f"cosim {command}: interrupted", (moment[0], err)
    assert all(own_lines(x) for x in lines[:-1]), (moment[0], err)
    return True


FUZZ_COUNT, FUZZ_CHUNK = 40, 10
# multiprocessing's spawned children: the resource tracker first, then one per worker
SPAWNED = "from multiprocessing."
TASK_PROCESS = "cosim.cluster.task_process"
FUZZ_MOMENTS: list[Moment] = [
    after(0.0),                                               # cosim's code starts: importing the commands
    spawned(SPAWNED, 1, "cluster start"),                     # the first process of the cluster
    records(1, "first record"),
    records(FUZZ_COUNT // FUZZ_CHUNK // 2, "mid-run"),
    records(FUZZ_COUNT // FUZZ_CHUNK, "close"),               # every record in: the cluster is closing
]
if SOAK:
    FUZZ_MOMENTS += [spawned(SPAWNED, 3, "workers starting"),  # both workers spawned, not yet up
                     spawned(TASK_PROCESS, 1, "first task")]   # a worker runs a task (its task process)
    FUZZ_MOMENTS += [after(k * 0.25) for k in range(1, 49)]


def test_fuzz_ctrl_c_at_many_moments_under_load(tmp_path, cpu_load):
    """`cosim fuzz` on the embedded cluster, Ctrl-C at each moment of FUZZ_MOMENTS with every core busy."""
    seen = []
    for k, moment in enumerate(FUZZ_MOMENTS):
        results = tmp_path / f"fuzz-{k}.jsonl"
        cmd = [*COSIM, "fuzz", "--count", str(FUZZ_COUNT), "--seed", "4", "--chunk", str(FUZZ_CHUNK),
               "--workers", "2", "--quiet", "--results", str(results)]
        t0 = time.monotonic()
        code, out, err, sent = interrupt(cmd, results, moment)
        recs = check_results(results)
        if check_interrupted("fuzz", moment, code, err, sent):
            assert not out, (moment[0], out)  # an interrupted run prints no summary
        else:  # the run was over: every record in, the summary printed
            assert len(recs) == FUZZ_COUNT // FUZZ_CHUNK, (moment[0], len(recs))
            assert out.strip().splitlines()[-1].startswith("fuzz: "), (moment[0], out)
        seen.append(f"{moment[0]}: exit {code}, {len(recs)} record(s), {time.monotonic() - t0:.1f} s")
    print("\n".join(seen))


def test_fuzz_ctrl_c_on_a_scheduler(dask_cluster, tmp_path):  # noqa: F811 - the imported fixture
    """`cosim fuzz --scheduler` (a real `dask scheduler` and two `dask worker`s): Ctrl-C during the connection,
    mid-run and at the close; then the cluster still serves a campaign that resumes the file to the end."""
    address, _workers = dask_cluster
    results = tmp_path / "fuzz.jsonl"
    cmd = [*COSIM, "fuzz", "--count", "120", "--seed", "6", "--chunk", "10", "--quiet", "--json",
           "--scheduler", address, "--results", str(results)]
    for moment in [after(0.5), records(3, "mid-run"), records(12, "close")]:
        if moment[0] == "close":
            results.unlink()
        code, out, err, sent = interrupt(cmd, results, moment)
        # with --json the summary line goes to stderr: a Ctrl-C that comes as the finished run exits leaves it
        check_interrupted("fuzz", moment, code, err, sent, own_lines=lambda line: line.startswith("fuzz: "))
        check_results(results)
    r = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and json.loads(r.stdout)["count"] == 120, r.stderr
    assert len(check_results(results)) == 12


def test_regress_ctrl_c_under_load(tmp_path, cpu_load):
    """`cosim regress` (one cell: vadd on small, fast back-end, Verilator): Ctrl-C while the cell runs (a
    Verilator build or the simulator, in the cell's task process)."""
    for k, moment in enumerate([spawned(TASK_PROCESS, 1, "cell running")]):
        results, junit = tmp_path / f"regress-{k}.jsonl", tmp_path / f"regress-{k}.xml"
        cmd = [*COSIM, "regress", "--configs", "small", "--backends", "fast", "--seeds", "1", "--examples", "vadd",
               "--simulators", "verilator", "--no-units", "--workers", "2", "--quiet", "--results", str(results),
               "--junit", str(junit)]
        code, out, err, sent = interrupt(cmd, results, moment, limit_s=300)
        check_results(results)
        if check_interrupted("regress", moment, code, err, sent):
            assert not junit.exists()  # an interrupted regression writes no report


def test_sweep_ctrl_c_under_load(tmp_path, cpu_load):
    """`cosim sweep` (4 TLM points, no area): Ctrl-C after the first point."""
    spec = tmp_path / "tiny.yaml"
    spec.write_text("name: tiny\nbase: small\nparameters:\n  dram_read_latency: [8, 16, 24, 32]\n"
                    "workloads:\n  - example: vadd\n    params: {shape: [64, 16], tile: 8}\n")
    for k, moment in enumerate([records(1, "first point")]):
        out_dir = tmp_path / f"out-{k}"
        results = out_dir / "results.jsonl"
        cmd = [*COSIM, "sweep", str(spec), "--out", str(out_dir), "--area", "none", "--rtl", "none",
               "--workers", "2"]
        code, out, err, sent = interrupt(cmd, results, moment, limit_s=300)
        # the sweep's own lines: what it runs (`sweep tiny: ...`) and its progress bar (`sweep tiny ...`)
        if check_interrupted("sweep", moment, code, err, sent, own_lines=lambda line: line.startswith("sweep tiny")):
            assert not (out_dir / "sweep.json").exists()
        check_results(results)


def test_fuzz_ctrl_c_without_dask(tmp_path, cpu_load):
    """`cosim fuzz --workers 0` (the tasks one by one in a task process of this machine): Ctrl-C mid-run kills
    the running task's process and leaves the records so far."""
    results = tmp_path / "fuzz.jsonl"
    cmd = [*COSIM, "fuzz", "--count", "60", "--seed", "4", "--chunk", "10", "--workers", "0", "--quiet",
           "--results", str(results)]
    code, out, err, sent = interrupt(cmd, results, records(1, "first record"))
    check_interrupted("fuzz", ("first record", records(1)[1]), code, err, sent)
    assert 1 <= len(check_results(results)) < 6


def test_sigterm_to_cosim_alone_ends_the_simulator_too(tmp_path):
    """SIGTERM to the `cosim run` process only (what a job scheduler or `kill` sends, not a terminal's whole
    group) while the RTL simulates: the simulator it started ends too (no process left running in a build
    folder whose lock is gone), and one line says so, exit 143."""
    from cosim.models import rtl_available

    if (why := rtl_available()) is not None:
        pytest.skip(why)

    def simulating(results: Path, t: float, proc: psutil.Process) -> bool:
        for c in proc.children(recursive=True):
            try:
                line = c.cmdline()  # once: a process ending between two calls gives [] to the second
                if line and line[0].endswith("/tb_fast"):
                    return True
            except psutil.Error:
                continue
        return False

    cmd = [*COSIM, "run", "requant", "-p", "shape=150x4000", "--model", "rtl", "--config", "small"]
    code, out, err, sent = interrupt(cmd, tmp_path / "none", ("simulating", simulating), limit_s=900,
                                     sig=signal.SIGTERM, group=False)
    assert sent and code == 143 and err.splitlines() == ["cosim run: terminated"], (code, err)


def test_sigterm_to_a_campaign_alone_stops_its_cluster(tmp_path):
    """SIGTERM to the `cosim fuzz` process only, mid-run on the embedded cluster: exit 143 and one
    'terminated' line, a valid results file, no worker or task process left (checked by interrupt())."""
    results = tmp_path / "fuzz.jsonl"
    cmd = [*COSIM, "fuzz", "--count", str(FUZZ_COUNT), "--seed", "4", "--chunk", str(FUZZ_CHUNK), "--workers", "2",
           "--quiet", "--results", str(results)]
    code, out, err, sent = interrupt(cmd, results, records(1, "first record"), sig=signal.SIGTERM, group=False)
    check_results(results)
    if sent and code not in (0, 1):  # not over before the signal came
        assert code == 143 and err.splitlines() == ["cosim fuzz: terminated"], (code, err)
