"""A fuzz campaign as engine tasks: chunks of cases spread over a Dask cluster (``cosim.cluster``).

One task runs a chunk of consecutive cases (``campaign.run_chunk``): with ``--rtl`` a chunk
holds about ``batch`` Programs per config, so the RTL still runs them in one simulator
process per (config, back-end); a failure is shrunk and saved by the task that found it
(``save_dir`` must then be a folder every worker can write: a shared file system on a
cluster). Cases are deterministic, so the counts are the same on one machine and on a
cluster, and a chunk's key names everything its outcome depends on, which makes a
results file resumable.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Sequence

import hashlib
import json

from cosim.cluster import Task, run_tasks
from cosim.cluster.progress import ProgressBar
from cosim import models
from cosim.fuzz import bins as coverage_bins
from cosim.fuzz.campaign import Summary, chunk_problem, fuzz_configs, run_chunk
from cosim.fuzz.multicore import fuzz_config

# Cases per task without the RTL (the reference and the TLM take ~15 ms a case).
CHUNK_NO_RTL = 50
# With coverage steering the chunks run in rounds of this many, the weights recomputed between rounds
# from the bins merged so far (a fixed round, so the cases do not depend on the number of workers).
STEER_ROUND = 10


def chunk_task(args: dict[str, Any]) -> dict[str, Any]:
    """Engine task: one chunk of a campaign (``args``: configs, seed, start, stop, rtl, fault_rate,
    save_dir, do_shrink, batch); returns ``run_chunk``'s outcome."""
    cfgs = [fuzz_config(n) for n in args["configs"]]
    return run_chunk(cfgs, args["seed"], args["start"], args["stop"], args["rtl"], args["fault_rate"],
                     args["save_dir"], args["do_shrink"], args["batch"], bool(args.get("coverage")),
                     args.get("steer"))


def default_chunk(rtl: bool, batch: int, n_configs: int) -> int:
    """Cases per task: with the RTL about ``batch`` Programs per config and simulator process."""
    return batch * n_configs if rtl else CHUNK_NO_RTL


def campaign_tasks(count: int, seed: int, configs: Sequence[str], rtl: bool, fault_rate: float,
                   save_dir: str | None, do_shrink: bool, batch: int, chunk: int, coverage: bool = False,
                   steer: dict[str, Any] | None = None, first: int = 0) -> list[Task]:
    """The campaign's chunks (of cases ``first`` to ``count - 1``) as tasks; a key holds what the chunk's
    outcome depends on (with coverage, the steering weights' digest too)."""
    tag = configs[0] if len(configs) == 1 else "+".join(configs)
    extra = ""
    if coverage:
        extra = " coverage"
        if steer is not None:
            extra += " steer=" + hashlib.sha256(json.dumps(steer, sort_keys=True).encode()).hexdigest()[:12]
    out = []
    for start in range(first, count, chunk):
        stop = min(count, start + chunk)
        models = "rtl" if rtl else "tlm"
        key = f"fuzz seed={seed} configs={tag} {models} faults={fault_rate:g} cases={start}-{stop - 1}{extra}"
        args: dict[str, Any] = {"configs": list(configs), "seed": seed, "start": start, "stop": stop, "rtl": rtl,
                                "fault_rate": fault_rate, "save_dir": save_dir, "do_shrink": do_shrink,
                                "batch": batch}
        if coverage:
            args.update(coverage=True, steer=steer)
        out.append(Task(key, "cosim.fuzz.distributed:chunk_task", args))
    return out


def run_distributed_campaign(count: int, seed: int, configs: Sequence[str] | None = None, rtl: bool = False,
                             fault_rate: float = 0.2, save_dir: str | Path | None = None, do_shrink: bool = True,
                             batch: int = 50, chunk: int | None = None, scheduler: str | None = None,
                             workers: int | None = None, results: str | Path | None = None,
                             progress: bool = True, timeout_s: float | None = None, coverage: bool = False,
                             steer: bool = False) -> Summary:
    """``campaign.run_campaign`` on the engine: the same cases and counts, spread as chunk tasks over the
    embedded cluster, ``scheduler`` (or ``COSIM_SCHEDULER``), or with ``workers=0`` this machine alone;
    ``results`` streams one record per chunk and resumes. A chunk that fails as a task (its time limit,
    its worker lost too often) counts each of its cases as an error. ``coverage`` merges the chunks'
    coverage bins (``cosim.fuzz.bins``); ``steer`` (with coverage) runs the chunks in rounds of
    ``STEER_ROUND``, each steered toward the bins the rounds before left empty."""
    t0 = time.perf_counter()
    names = fuzz_configs(configs)  # bad names fail here, in one line, before any cluster starts
    chunk = chunk or default_chunk(rtl, batch, len(names))
    where = str(Path(save_dir).resolve()) if save_dir is not None else None
    coverage = coverage or steer
    cfgs = [fuzz_config(n) for n in names]
    for c in cfgs:  # a config's unreadable timing calibration: one line now, not one failure per case
        models.Timing.from_config(c)
    label = names[0] if len(names) == 1 else (configs[0] if configs and len(configs) == 1 else "all")  # "multicore"
    summ = Summary(count, seed, label, rtl)
    if coverage:
        summ.coverage, summ.coverage_configs = {}, list(names)
    bar = ProgressBar(count, "fuzz", progress)
    done = 0
    span = chunk * STEER_ROUND if steer else max(count, 1)
    for first in range(0, count, span):
        w = coverage_bins.steer_weights(summ.coverage, cfgs) if steer else None
        tasks = campaign_tasks(min(count, first + span), seed, names, rtl, fault_rate, where, do_shrink, batch,
                               chunk, coverage, w, first)
        args_of = {t.key: t.args for t in tasks}
        for rec in run_tasks(tasks, results=results, scheduler=scheduler, workers=workers, progress=False,
                             desc="fuzz", timeout_s=timeout_s):
            args = args_of[rec["key"]]
            if rec["ok"]:
                problem = chunk_problem(rec["result"], args["stop"] - args["start"])
                if problem is not None:
                    raise ValueError(f"{results or 'results'}: record {rec['key']!r}: {problem}")
                summ.add(rec["result"])
                done += rec["result"]["cases"]
            else:
                n = args["stop"] - args["start"]
                summ.errors += n
                summ.not_run += n
                summ.failures.append({"index": args["start"], "config": summ.config, "kind": "task",
                                      "problems": [f"cases {args['start']}-{args['stop'] - 1} did not run: "
                                                   f"{rec['error']}"]})
                done += n
            bar.update(done, summ.mismatches + summ.errors)
    bar.close()
    summ.failures.sort(key=lambda f: f["index"])
    summ.wall_s = time.perf_counter() - t0
    return summ
