"""The suite under load: run the tests K times from a clean clone while N busy processes load the cores.

A test that passes alone and fails one time in ten on a busy machine is flaky; this finds it.
``make soak`` (or ``python -m cosim.soak``):

1. clones the repository's committed ``HEAD`` (uncommitted changes are not in it) into a
   temporary folder, so the run starts as a fresh clone would (``make test`` makes its ``.venv``);
2. starts ``--load`` busy-loop processes (default: one per core), each bounded in time;
3. runs the suite ``--runs`` times: ``make test`` when no pytest arguments are given, else
   ``make venv`` once and ``pytest ARGS`` (a reduced selection, e.g. ``-- -q tests/test_cluster.py``);
   each run's JUnit XML (through ``PYTEST_ADDOPTS``) and log go to ``--out``;
4. kills the load, removes the clone (``--keep`` keeps it), prints which tests failed in which
   runs (a test that failed in some runs only is flaky), writes ``summary.json``; exit 1 when
   any run failed.

Only the standard library: it runs before any ``.venv`` exists.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
# One run of the whole suite may take this long before it counts as hung (seconds).
RUN_TIMEOUT_S = 3600.0
# Bound of one git or helper command (a local clone of the repository: seconds).
GIT_TIMEOUT_S = 600
BUSY_LOOP = "import sys, time\nend = time.monotonic() + float(sys.argv[1])\nwhile time.monotonic() < end:\n    pass\n"


def start_load(n: int, limit_s: float) -> list[subprocess.Popen]:
    """``n`` busy-loop processes, each ending by itself after ``limit_s`` seconds."""
    return [subprocess.Popen([sys.executable, "-c", BUSY_LOOP, str(limit_s)], stdin=subprocess.DEVNULL)
            for _ in range(n)]


def stop(procs: list[subprocess.Popen]) -> None:
    """Kill the processes (each with its process group when it leads one) and reap them."""
    for p in procs:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL) if os.getpgid(p.pid) == p.pid else p.kill()
            except (ProcessLookupError, PermissionError):
                pass
    for p in procs:
        p.wait()


def clone(source: Path, rev: str, where: Path) -> Path:
    """A fresh clone of ``source`` at ``rev`` in ``where/repo``."""
    dest = where / "repo"
    subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(source), str(dest)], check=True,
                   timeout=GIT_TIMEOUT_S)
    subprocess.run(["git", "-C", str(dest), "checkout", "--quiet", "--detach", rev], check=True, timeout=GIT_TIMEOUT_S)
    return dest


def run_logged(cmd: list[str], cwd: Path, env: dict[str, str], log: Path, timeout_s: float) -> tuple[int, float]:
    """Run ``cmd`` in a session of its own with its output in ``log``; (exit code, or -1 on timeout; seconds)."""
    t0 = time.monotonic()
    with open(log, "wb") as out:
        p = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             start_new_session=True)
        try:
            code = p.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            stop([p])
            code = -1
            out.write(f"\nsoak: the run took longer than {timeout_s:g} s and was killed\n".encode())
    return code, time.monotonic() - t0


def failed_tests(junit: Path) -> list[str]:
    """The ids (``classname::name``) of the failed and errored testcases of a JUnit XML file."""
    if not junit.exists():
        return []
    try:
        root = ET.parse(junit).getroot()
    except ET.ParseError:
        return ["<the JUnit XML of this run is not readable>"]
    out = []
    for tc in root.iter("testcase"):
        if tc.find("failure") is not None or tc.find("error") is not None:
            out.append(f"{tc.get('classname', '')}::{tc.get('name', '')}")
    return out


def tally(run_records: list[dict[str, Any]], runs: int) -> tuple[dict[str, list[int]], list[str]]:
    """(test id -> the runs it failed in, the flaky tests: failed in some of the ``runs`` but not all)."""
    by_test: dict[str, list[int]] = {}
    for r in run_records:
        for t in r["failed"]:
            by_test.setdefault(t, []).append(r["run"])
    return by_test, sorted(t for t, ks in by_test.items() if len(ks) < runs)


def soak(runs: int, load: int, pytest_args: list[str], out_dir: Path, rev: str = "HEAD", keep: bool = False,
         run_timeout_s: float = RUN_TIMEOUT_S, jobs: str = "auto") -> dict[str, Any]:
    """Run the suite ``runs`` times from a clean clone under ``load`` busy processes; the summary."""
    out_dir.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="cosim-soak-"))
    busy: list[subprocess.Popen] = []
    summary: dict[str, Any] = {"runs": [], "load": load, "pytest_args": pytest_args, "rev": rev}
    try:
        repo = clone(REPO, rev, work)
        summary["commit"] = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True,
                                           text=True, check=True, timeout=GIT_TIMEOUT_S).stdout.strip()
        env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_ADDOPTS", "VIRTUAL_ENV")}
        if pytest_args:  # the venv first, outside the timed runs (make test does it inside its first run)
            code, secs = run_logged(["make", "venv"], repo, env, out_dir / "venv.log", run_timeout_s)
            if code != 0:
                raise RuntimeError(f"make venv failed in the clone (exit {code}); see {out_dir / 'venv.log'}")
            vpy = str(repo / ".venv" / "bin" / "python")
            vbin = subprocess.run([vpy, "-m", "hw.toolchain"], cwd=repo, capture_output=True, text=True,
                                  check=True, timeout=GIT_TIMEOUT_S).stdout.strip()
            env = {**env, "PATH": f"{vbin}:{repo / '.venv' / 'bin'}:{env.get('PATH', '')}",
                   "VERILATOR_ROOT": str(Path(vbin).parent)}
            cmd = [vpy, "-m", "pytest", *pytest_args]
        else:
            cmd = ["make", "test", f"JOBS={jobs}"]
        busy = start_load(load, runs * run_timeout_s)
        for k in range(1, runs + 1):
            junit = out_dir / f"run-{k}.xml"
            junit.unlink(missing_ok=True)
            code, secs = run_logged(cmd, repo, {**env, "PYTEST_ADDOPTS": f"--junitxml={junit}"},
                                    out_dir / f"run-{k}.log", run_timeout_s)
            failed = failed_tests(junit)
            if code != 0 and not failed:
                failed = [f"<run {k} exited {code} with no failed testcase: see run-{k}.log>"]
            summary["runs"].append({"run": k, "exit": code, "wall_s": round(secs, 1), "failed": failed})
            print(f"soak run {k}/{runs}: exit {code} in {secs:.0f} s, {len(failed)} failed"
                  f"{': ' + ', '.join(failed) if failed else ''}", flush=True)
    finally:
        stop(busy)
        if keep:
            summary["clone"] = str(work / "repo")
        else:
            shutil.rmtree(work, ignore_errors=True)
    summary["failures"], summary["flaky"] = tally(summary["runs"], runs)
    summary["ok"] = len(summary["runs"]) == runs and all(r["exit"] == 0 for r in summary["runs"])
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    return summary


def main(argv: list[str] | None = None) -> int:
    from cosim.cli import CosimArgumentParser, float_arg, int_arg

    ap = CosimArgumentParser(prog="python -m cosim.soak", description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int_arg(1), default=3, help="how many times to run the suite (default 3)")
    ap.add_argument("--load", type=int_arg(0), default=os.cpu_count() or 1,
                    help="busy-loop processes during the runs (default: one per core)")
    ap.add_argument("--out", type=Path, default=REPO / "build" / "soak",
                    help="logs, JUnit XML and summary.json (default build/soak)")
    ap.add_argument("--rev", default="HEAD", help="the commit to clone (default HEAD: committed work only)")
    ap.add_argument("--jobs", default="auto", help="pytest-xdist workers of make test (default auto)")
    ap.add_argument("--timeout", type=float_arg(1e-3, 1e9, "a positive number of seconds"), default=RUN_TIMEOUT_S,
                    help="seconds before a run counts as hung")
    ap.add_argument("--keep", action="store_true", help="keep the clone (its path is in summary.json)")
    ap.add_argument("pytest_args", nargs="*", metavar="-- PYTEST_ARG",
                    help="run pytest with these arguments instead of `make test` (a reduced selection)")
    args = ap.parse_args(argv)
    try:
        s = soak(args.runs, args.load, args.pytest_args, args.out.resolve(), args.rev, args.keep, args.timeout,
                 args.jobs)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, RuntimeError, OSError) as e:
        print(f"soak: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("soak: interrupted", file=sys.stderr)
        return 130
    print(f"soak: {len(s['runs'])} run(s) under {s['load']} busy process(es): "
          f"{sum(r['exit'] == 0 for r in s['runs'])} passed; failed tests: "
          f"{', '.join(f'{t} (runs {ks})' for t, ks in s['failures'].items()) or 'none'}; "
          f"flaky: {', '.join(s['flaky']) or 'none'} ({args.out / 'summary.json'})")
    return 0 if s["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
