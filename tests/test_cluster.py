"""The scale-out engine (cosim/cluster) on real Dask clusters: embedded, and a scheduler with two workers.

* a small fuzz campaign on the embedded LocalCluster gives the same counts as in one process;
* a real ``dask scheduler`` and two ``dask worker --nthreads 1`` processes on 127.0.0.1 (started
  and stopped here), one worker SIGKILLed while it runs a chunk: every chunk recorded exactly once,
  the killed one retried on the other worker, the counts those of the single-machine run;
* resume: a campaign stopped after a few records (and a file whose last line was cut short) runs
  only the rest when run again;
* a task that raises, hangs past its time limit, dies or returns what JSON cannot hold is a
  failed record, and the campaign goes on.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import psutil
import pytest

from cosim.cluster import Task, run_tasks
from cosim.fuzz.campaign import run_campaign
from cosim.fuzz.distributed import run_distributed_campaign

REPO = Path(__file__).resolve().parents[1]
DASK = Path(sys.executable).parent / "dask"
COSIM = [sys.executable, "-m", "cosim.cli"]


def _counts(s) -> dict:
    """The counts of a campaign's summary (a Summary or its JSON)."""
    d = s if isinstance(s, dict) else s.to_json()
    return {k: d[k] for k in ("count", "mismatches", "errors", "faulty", "by_kind")}


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_embedded_cluster_fuzz_campaign(tmp_path):
    """60 cases in 6 chunks on a 2-worker embedded cluster: the counts of the one-process run, one record
    per chunk, each from a worker of the cluster."""
    results = tmp_path / "fuzz.jsonl"
    s = run_distributed_campaign(60, 7, chunk=10, workers=2, results=results, progress=False)
    assert _counts(s) == _counts(run_campaign(60, 7, progress=False))
    recs = _records(results)
    assert len(recs) == 6 and len({r["key"] for r in recs}) == 6
    assert all(r["ok"] and r["worker"].startswith("tcp://127.0.0.1:") and r["attempts"] == 1 for r in recs)
    assert sum(r["result"]["cases"] for r in recs) == 60


def test_failures_are_records(tmp_path):
    """A raising task, a hung one (time limit), one that dies and one returning a set: four failed records
    with one-line errors; the good tasks around them run in their own work directories, removed after."""
    tasks = [Task("good-1", "tests.cluster_tasks:square", {"x": 3}),
             Task("raises", "tests.cluster_tasks:fail", {"case": 17}),
             Task("hangs", "tests.cluster_tasks:hang", {"sleep": 60.0}),
             Task("dies", "tests.cluster_tasks:crash", {}),
             Task("not-json", "tests.cluster_tasks:not_json", {}),
             Task("no-such-fn", "tests.cluster_tasks:nothing_here", {}),
             Task("good-2", "tests.cluster_tasks:square", {"x": 4})]
    t0 = time.monotonic()
    recs = {r["key"]: r for r in run_tasks(tasks, workers=2, timeout_s=3.0, progress=False,
                                           results=tmp_path / "r.jsonl")}
    assert time.monotonic() - t0 < 60
    assert set(recs) == {t.key for t in tasks}
    assert recs["good-1"]["ok"] and recs["good-1"]["result"]["y"] == 9 and recs["good-2"]["result"]["y"] == 16
    wd = recs["good-1"]["result"]["workdir"]
    assert recs["good-1"]["result"]["cwd"] == wd != recs["good-2"]["result"]["workdir"]
    assert not Path(wd).exists()
    errors = {k: r["error"] for k, r in recs.items() if not r["ok"]}
    assert errors["raises"] == "AssertionError: mismatch in case 17"
    assert errors["hangs"].startswith("TimeoutError") and "3 s" in errors["hangs"]
    assert "died" in errors["dies"] and "exit code 139" in errors["dies"]
    assert errors["not-json"].startswith("TypeError") and "JSON" in errors["not-json"]
    assert "nothing_here" in errors["no-such-fn"]
    assert set(errors) == {"raises", "hangs", "dies", "not-json", "no-such-fn"}
    assert all("\n" not in e for e in errors.values())
    assert len(_records(tmp_path / "r.jsonl")) == len(tasks)


def test_resume_runs_only_the_rest(tmp_path):
    """Stop a campaign after 3 records (the consumer stops iterating: the cluster is closed), cut the file's
    last line short as a crash mid-write would, run again: the finished keys come back marked resumed and
    only the others run."""
    results = tmp_path / "r.jsonl"
    tasks = [Task(f"t{i}", "tests.cluster_tasks:square", {"x": i, "sleep": 0.2}) for i in range(10)]
    first = []
    for rec in run_tasks(tasks, workers=2, results=results, progress=False):
        first.append(rec["key"])
        if len(first) == 3:
            break
    assert len(_records(results)) == 3
    with open(results, "a") as f:
        f.write('{"key": "t9", "ok": tr')  # a record cut short: not a result
    again = list(run_tasks(tasks, workers=2, results=results, progress=False))
    assert sorted(r["key"] for r in again) == sorted(t.key for t in tasks)
    assert {r["key"] for r in again if r.get("resumed")} == set(first)
    recs = _records(results)
    assert Counter(r["key"] for r in recs) == Counter({t.key: 1 for t in tasks})
    assert all(r["result"]["y"] == int(r["key"][1:]) ** 2 for r in recs)
    # everything done: nothing runs, no cluster starts
    t0 = time.monotonic()
    assert all(r["resumed"] for r in run_tasks(tasks, results=results, progress=False))
    assert time.monotonic() - t0 < 1.0


def test_bad_arguments_fail_before_any_cluster():
    with pytest.raises(ValueError, match="appears twice"):
        run_tasks([Task("a", "m:f", {}), Task("a", "m:f", {})])
    with pytest.raises(ValueError, match="not 'package.module:function'"):
        run_tasks([Task("a", "no_colon", {})])
    with pytest.raises(ValueError, match="JSON"):
        run_tasks([Task("a", "m:f", {"x": object()})])
    with pytest.raises(ValueError, match="expected a Dask scheduler address"):
        run_tasks([Task("a", "m:f", {})], scheduler="not an address")


def test_cli_refuses_bad_scheduler_in_one_line():
    env = {**os.environ, "COSIM_CONNECT_TIMEOUT": "2"}
    r = subprocess.run([*COSIM, "fuzz", "--count", "5", "--scheduler", "nowhere"], capture_output=True, text=True,
                       timeout=60, env=env)
    assert r.returncode == 2 and "expected a Dask scheduler address" in r.stderr and "Traceback" not in r.stderr
    r = subprocess.run([*COSIM, "fuzz", "--count", "5", "--scheduler", f"tcp://127.0.0.1:{_free_port()}"],
                       capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 2 and "cannot reach the Dask scheduler" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


@pytest.mark.parametrize("server, why", [("http", "sent nothing in 2 s"), ("silent", "sent nothing in 2 s"),
                                         ("junk", "not Dask's protocol"), ("closes", "closed the connection")])
def test_a_server_that_is_not_a_dask_scheduler_is_one_line_within_the_connect_timeout(server, why):
    """The dashboard's port, or any server that does not speak Dask: Dask's client would wait on it forever
    (or read a frame length of exabytes from its bytes)."""
    import http.server
    import threading

    if server == "http":
        srv = http.server.HTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
        port = srv.server_address[1]
        threading.Thread(target=srv.serve_forever, daemon=True).start()
    else:
        lsock = socket.socket()
        lsock.bind(("127.0.0.1", 0))
        lsock.listen(4)
        port = lsock.getsockname()[1]

        def answer() -> None:
            conn, _ = lsock.accept()
            if server == "junk":
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")
            if server == "closes":
                conn.close()
            else:
                time.sleep(10)

        if server != "silent":
            threading.Thread(target=answer, daemon=True).start()
    env = {**os.environ, "COSIM_CONNECT_TIMEOUT": "2"}
    for address in (f"tcp://127.0.0.1:{port}", f"127.0.0.1:{port}"):
        r = subprocess.run([*COSIM, "fuzz", "--count", "1", "--scheduler", address], capture_output=True, text=True,
                           timeout=60, env=env)
        assert r.returncode == 2 and "did not answer as a Dask scheduler" in r.stderr and why in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
        if server in ("closes", "junk"):
            break  # their one answer is spent


def test_an_ipv6_scheduler_address_is_an_address():
    from cosim.cluster.engine import scheduler_address

    assert scheduler_address("tcp://[::1]:8786") == "tcp://[::1]:8786"
    assert scheduler_address("[::1]:8786") == "tcp://[::1]:8786"
    with pytest.raises(ValueError, match="expected a Dask scheduler address"):
        scheduler_address("tcp://[::1")


# ---- a real scheduler and two workers ------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(cmd: list[str], log: Path) -> subprocess.Popen:
    # its own process group: the test kills a worker with everything it started, as a machine lost would;
    # the tasks' work directories under the test's folder, to see that none is left behind
    work = log.parent / "work"
    work.mkdir(exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(REPO), "COSIM_WORK_DIR": str(work)}
    return subprocess.Popen(cmd, cwd=REPO, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT,
                            start_new_session=True)


def _stop(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)
    deadline = time.monotonic() + 15
    for p in procs:
        try:
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


@pytest.fixture
def dask_cluster(tmp_path):
    """``dask scheduler`` and two ``dask worker --nthreads 1`` on 127.0.0.1: (address, [worker processes]);
    every process is stopped at the end, whatever happened."""
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    procs = [_start([str(DASK), "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
                    tmp_path / "scheduler.log")]
    try:
        workers = [_start([str(DASK), "worker", address, "--nthreads", "1", "--nworkers", "1", "--host",
                           "127.0.0.1", "--no-dashboard", "--name", f"w{k}"], tmp_path / f"worker{k}.log")
                   for k in range(2)]
        procs += workers
        from distributed import Client

        with Client(address, timeout=30) as c:
            c.wait_for_workers(2, timeout=60)
        yield address, workers
    finally:
        _stop(procs)


def _descendants(p: subprocess.Popen) -> list[psutil.Process]:
    return [p_ for p_ in psutil.Process(p.pid).children(recursive=True)]


def test_real_scheduler_two_workers_one_killed(dask_cluster, tmp_path):
    """`cosim fuzz --scheduler` against the cluster; one worker (its whole process group) SIGKILLed while it
    runs a chunk: every chunk recorded once, the killed chunk retried on the other worker, the counts equal to
    the single-machine run, and the killed worker's task process gone with it, its work directory removed."""
    address, workers = dask_cluster
    results = tmp_path / "fuzz.jsonl"
    count, chunk = 240, 40
    t0 = time.monotonic()
    run = subprocess.Popen([*COSIM, "fuzz", "--count", str(count), "--seed", "3", "--chunk", str(chunk), "--json",
                            "--quiet", "--scheduler", address, "--results", str(results)],
                           cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        from distributed import Client

        with Client(address, timeout=30) as c:
            pids = c.run(os.getpid)  # worker address -> its process
            victim, seen = None, {}
            while victim is None and time.monotonic() - t0 < 120 and run.poll() is None:
                done = len(results.read_text().splitlines()) if results.exists() else 0
                now = time.monotonic()
                for w, keys in c.processing().items():
                    for k in keys:
                        seen.setdefault((w, k), now)
                # once a chunk has finished (the task processes are warm), kill a worker that has been on a
                # chunk for a while (its start is known to the scheduler)
                ripe = [w for (w, k), t in seen.items() if now - t > 0.2 and k in c.processing().get(w, ())]
                if done >= 1 and ripe:
                    pid = pids[ripe[0]]
                    victim = next(p for p in workers if pid in [d.pid for d in _descendants(p)])
                    doomed = _descendants(victim)
                    t_kill = time.monotonic() - t0
                    os.killpg(victim.pid, signal.SIGKILL)
                    break
                time.sleep(0.02)
        out, err = run.communicate(timeout=240)
    finally:
        if run.poll() is None:
            run.kill()
    wall = time.monotonic() - t0
    assert victim is not None, "no chunk ran on a worker to kill"
    assert run.returncode == 0, err
    j = json.loads(out)
    assert _counts(j) == _counts(run_campaign(count, 3, progress=False))
    recs = _records(results)
    assert Counter(r["key"] for r in recs) == Counter({r["key"]: 1 for r in recs}) and len(recs) == count // chunk
    assert all(r["ok"] for r in recs)
    assert max(r["attempts"] for r in recs) >= 2, [(r["key"], r["attempts"], r["worker"]) for r in recs]
    time.sleep(1.0)
    assert not [p for p in doomed if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert not list((tmp_path / "work").iterdir())  # the killed task's work directory too
    retried = [(r["key"], r["attempts"], r["worker"]) for r in recs if r["attempts"] > 1]
    print(f"worker killed at {t_kill:.1f} s; campaign done in {wall:.1f} s; retried: {retried}")


def test_ctrl_c_then_resume(tmp_path):
    """Ctrl-C (SIGINT to the terminal's process group) in `cosim fuzz` on the embedded cluster: exit 130 in one
    line, every process it started gone, a valid results file; the same command again runs only the rest and
    gives the counts of an uninterrupted campaign."""
    results = tmp_path / "fuzz.jsonl"
    cmd = [*COSIM, "fuzz", "--count", "300", "--seed", "5", "--chunk", "10", "--workers", "2", "--json",
           "--results", str(results)]
    run = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        t0 = time.monotonic()
        while time.monotonic() - t0 < 120 and run.poll() is None:
            if results.exists() and len(results.read_text().splitlines()) >= 2:
                break
            time.sleep(0.02)
        started = _descendants(run)
        os.killpg(run.pid, signal.SIGINT)
        t_int = time.monotonic()
        out, err = run.communicate(timeout=60)
        stop_s = time.monotonic() - t_int
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
    # the last line says so; before it only the campaign's own progress lines (nothing from Dask or a worker)
    lines = err.splitlines()
    assert run.returncode == 130 and lines[-1] == "cosim fuzz: interrupted", err
    assert all(x.startswith("fuzz: ") for x in lines[:-1]), err
    assert stop_s < 20, stop_s
    time.sleep(0.5)
    assert not [p for p in started if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    first = _records(results)
    assert 2 <= len(first) < 30
    r = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    recs = _records(results)
    assert len(recs) == 30 == len({x["key"] for x in recs}) and recs[:len(first)] == first
    assert _counts(json.loads(r.stdout)) == _counts(run_campaign(300, 5, progress=False))


def test_a_task_stopped_by_a_shorter_limit_runs_again_on_resume(tmp_path):
    """A time-out is not the result under a longer limit: resumed with one, the task runs again; a failure
    of its own and a time-out under the same limit are kept."""
    results = tmp_path / "r.jsonl"
    tasks = [Task("slow", "tests.cluster_tasks:hang", {"sleep": 1.5}),
             Task("raises", "tests.cluster_tasks:fail", {"case": 1})]
    first = {r["key"]: r for r in run_tasks(tasks, results=results, workers=0, timeout_s=0.5, progress=False)}
    assert first["slow"]["timed_out_s"] == 0.5 and not first["slow"]["ok"]
    same = {r["key"]: r for r in run_tasks(tasks, results=results, workers=0, timeout_s=0.5, progress=False)}
    assert same["slow"].get("resumed") and same["raises"].get("resumed")
    longer = {r["key"]: r for r in run_tasks(tasks, results=results, workers=0, timeout_s=20, progress=False)}
    assert longer["slow"]["ok"] and "resumed" not in longer["slow"] and longer["raises"].get("resumed")
    assert len(_records(results)) == 3  # the new record of "slow" appended: the last of a key wins
    again = {r["key"]: r for r in run_tasks(tasks, results=results, workers=0, timeout_s=20, progress=False)}
    assert again["slow"]["ok"] and again["slow"].get("resumed")


def test_without_dask_same_records(tmp_path):
    """workers=0: the tasks one by one in a task process of this machine; the same records and failures."""
    tasks = [Task("ok", "tests.cluster_tasks:square", {"x": 5}),
             Task("raises", "tests.cluster_tasks:fail", {"case": 2}),
             Task("hangs", "tests.cluster_tasks:hang", {"sleep": 30.0})]
    recs = {r["key"]: r for r in run_tasks(tasks, workers=0, timeout_s=1.0, progress=False)}
    assert recs["ok"]["ok"] and recs["ok"]["result"]["y"] == 25 and recs["ok"]["worker"].startswith("local:")
    assert recs["raises"]["error"] == "AssertionError: mismatch in case 2"
    assert recs["hangs"]["error"].startswith("TimeoutError") and recs["hangs"]["wall_s"] < 10
