"""`cosim clean [--keep N]`: remove the simulator builds not used recently (each Verilator model is
about 150 MB; see the README)."""

from __future__ import annotations

import argparse
import json

from hw.result import byte_size
from cosim import models
from cosim.cli import UserError, add_json_arg, int_arg


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser("clean", help="remove simulator builds not used recently",
                       description="Remove the Verilator builds under the build folder (cocotb back-ends and the "
                                   "raw harness), keeping the N most recently used (built or run), and the run "
                                   "folders that failed or stopped runs left in the kept ones. A build in use is "
                                   "waited for, not cut short; one stopped half-way counts as the least recently "
                                   "used; the next run that needs a removed one builds it again.")
    p.add_argument("--keep", type=int_arg(0, 10_000), default=4, metavar="N",
                   help="builds to keep, the most recently used (default 4; 0 removes them all)")
    p.add_argument("--dry-run", action="store_true", help="only say what would be removed")
    add_json_arg(p)
    return p


def run(args: argparse.Namespace) -> int:
    root = models.build_root()
    if root.exists() and not root.is_dir():
        raise UserError(f"{root}: the build folder (COSIM_BUILD_DIR or the repository's build/) is not a folder")
    found = models.cached_builds()
    keep, drop = found[:args.keep], found[args.keep:]
    if not args.dry_run:
        used = [b for b in drop if not models.remove_build(b)]  # used while we waited: kept
        keep, drop = keep + used, [b for b in drop if b not in used]
    runs_freed = sum(models.prune_build_runs(b, dry_run=args.dry_run) for b in keep)
    freed = sum(b.bytes for b in drop)
    if args.json:
        print(json.dumps({"kept": [b.to_json() for b in keep], "removed": [b.to_json() for b in drop],
                          "freed_bytes": freed, "run_folders_freed_bytes": runs_freed, "dry_run": args.dry_run}))
        return 0
    verb = "would remove" if args.dry_run else "removed"
    for b in drop:
        print(f"{verb} {b.path} ({byte_size(b.bytes)})")
    runs = f"; run folders left in kept builds: {byte_size(runs_freed)}" if runs_freed else ""
    print(f"{verb} {len(drop)} build(s), {byte_size(freed)}; kept {len(keep)} "
          f"({byte_size(sum(b.bytes for b in keep) - runs_freed)}){runs}")
    return 0
