#!/usr/bin/env python3
"""kill -9 at random moments, then --resume: counts what survives.

Runs `tessel tune ... --resume` over a replay table and over the NeuronCore
simulator, kills each run with SIGKILL at a random moment, and after every
kill reads the study file with Python's own sqlite3 (not tessel) to check:
  - integrity: PRAGMA integrity_check is "ok";
  - nothing lost: every trial seen finished after an earlier kill is still
    there, unchanged (config, status, objective);
  - no duplicates: no config (key) stored twice;
  - rows: trial ids are 1..n without gaps.
When a study reaches its budget it is checked once more (`tessel show` must
read it) and a new one starts. Prints a summary table; --json writes it too.

    benchmarks/kill_resume.py --kills 1000                 # the issue-15 figure
    benchmarks/kill_resume.py --kills 40 --tessel PATH     # a quick look
"""

import argparse
import json
import os
import pathlib
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent


def workloads(budget_replay, budget_sim):
    """(name, tune arguments before --db) for each kind of run."""
    replay = ROOT / "data" / "bench" / "convolution_RTX_3090.json.gz"
    return [
        ("replay", ["tune", str(replay), "--budget", str(budget_replay)]),
        ("sim", ["tune", str(ROOT / "examples" / "matmul.tsl"), "--backend", "sim",
                 "--target", "trn2", "--budget", str(budget_sim)]),
    ]


class study_file:
    """One study file under test and what was seen finished in it."""

    def __init__(self, path):
        self.path = path
        self.finished = {}  # id -> (config_json, status, objective)
        self.completed = False

    def remove(self):
        for suffix in ("", "-wal", "-shm", "-lock"):
            try:
                os.remove(str(self.path) + suffix)
            except FileNotFoundError:
                pass
        self.finished = {}

    def check(self, totals):
        """Reads the file after a kill; adds what it finds wrong to totals."""
        if not self.path.exists():
            return 0
        db = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=30)
        try:
            ok = db.execute("PRAGMA integrity_check").fetchone()[0]
            if ok != "ok":
                totals["integrity_failures"] += 1
            rows = db.execute(
                "SELECT id, key, config_json, state, status, objective FROM trials ORDER BY id"
            ).fetchall()
        except sqlite3.DatabaseError as e:  # a schema not yet made counts as empty
            if "no such table" in str(e):
                return 0
            totals["unreadable"] += 1
            return 0
        finally:
            db.close()
        ids = [r[0] for r in rows]
        if ids != list(range(1, len(ids) + 1)):
            totals["id_gaps"] += 1
        keys = [r[1] for r in rows]
        totals["duplicate_configs"] += len(keys) - len(set(keys))
        now = {r[0]: (r[2], r[4], r[5]) for r in rows if r[3] == "finished"}
        for trial_id, seen in self.finished.items():
            if trial_id not in now:
                totals["finished_lost"] += 1
            elif now[trial_id] != seen:
                totals["finished_changed"] += 1
        self.finished.update(now)
        return len(rows)


def run(args):
    rng = random.Random(args.seed)
    work = pathlib.Path(tempfile.mkdtemp(prefix="tessel_kill_resume_"))
    kinds = workloads(args.budget_replay, args.budget_sim)
    files = {name: study_file(work / f"{name}.tessel.db") for name, _ in kinds}
    totals = {k: 0 for k in ("kills", "runs_completed", "studies_completed", "rows_checked",
                             "finished_lost", "finished_changed", "duplicate_configs",
                             "id_gaps", "integrity_failures", "unreadable", "show_failures",
                             "bad_exits")}
    per_kind = {name: {"kills": 0, "studies": 0, "rows": 0} for name, _ in kinds}
    started = time.monotonic()
    i = 0
    while totals["kills"] < args.kills:
        name, tune = kinds[i % len(kinds)]
        i += 1
        f = files[name]
        seed = str(args.seed * 1000 + per_kind[name]["studies"])  # one per study file
        command = [args.tessel] + tune + ["--seed", seed, "--resume", "--quiet", "--db",
                                          str(f.path)]
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            proc.wait(timeout=rng.uniform(0.0, args.max_delay))
            # It finished before the kill: the study is complete.
            err = proc.stderr.read().decode(errors="replace")
            if proc.returncode != 0:
                totals["bad_exits"] += 1
                print(f"{name}: exit {proc.returncode}: {err.strip()[-300:]}", file=sys.stderr)
            totals["runs_completed"] += 1
            totals["rows_checked"] += f.check(totals)
            show = subprocess.run([args.tessel, "show", str(f.path)], capture_output=True)
            if show.returncode != 0:
                totals["show_failures"] += 1
            totals["studies_completed"] += 1
            per_kind[name]["studies"] += 1
            f.remove()
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            proc.stderr.close()
            totals["kills"] += 1
            per_kind[name]["kills"] += 1
            rows = f.check(totals)
            totals["rows_checked"] += rows
            per_kind[name]["rows"] += rows
            if args.progress and totals["kills"] % args.progress == 0:
                print(f"[{totals['kills']}/{args.kills}] {time.monotonic() - started:.0f} s",
                      file=sys.stderr)
    for f in files.values():
        f.remove()
    os.rmdir(work)
    totals["seconds"] = round(time.monotonic() - started, 1)
    return totals, per_kind


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tessel", default=str(ROOT / "build" / "release" / "src" / "cli" /
                                                 "tessel"), help="the tessel tool to run")
    parser.add_argument("--kills", type=int, default=1000)
    parser.add_argument("--max-delay", type=float, default=1.5,
                        help="a run is killed after a uniform delay in [0, this] seconds")
    parser.add_argument("--budget-replay", type=int, default=400)
    parser.add_argument("--budget-sim", type=int, default=150)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--progress", type=int, default=100, help="a line every N kills")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    if not os.access(args.tessel, os.X_OK):
        sys.exit(f"kill_resume: no tessel tool at {args.tessel} (build it, or pass --tessel)")
    totals, per_kind = run(args)
    print(f"{'kind':<8}{'kills':>8}{'studies done':>14}{'rows read':>12}")
    for name, k in per_kind.items():
        print(f"{name:<8}{k['kills']:>8}{k['studies']:>14}{k['rows']:>12}")
    for key, value in totals.items():
        print(f"{key:<22}{value}")
    bad = sum(totals[k] for k in ("finished_lost", "finished_changed", "duplicate_configs",
                                  "id_gaps", "integrity_failures", "unreadable",
                                  "show_failures", "bad_exits"))
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps({"totals": totals, "kinds": per_kind},
                                                      indent=2) + "\n")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
