#!/usr/bin/env python3
"""Many processes, one study: load and faults on a PostgreSQL study.

Starts a throwaway PostgreSQL server (scripts/pg_cluster), then:

1. Faults. `tessel tune --db postgresql://...` makes a simulator study
   (examples/matmul.tsl, trn2) of EVALUATIONS trials and works it with
   WORKERS `tessel worker` processes alongside; every KILL_EVERY seconds a
   random worker gets SIGKILL and a new one starts in its place; the server
   is restarted (an abrupt stop, as a crash) once, when half the trials are
   finished. When tune is done, the study is read with psql (not tessel):
   every trial finished, none lost, no config counted twice, how many
   trials were evaluated again after their worker died, and how many late
   results were discarded. The trials each killed worker was running are
   followed: seconds from the kill until they were back in the queue (the
   lease, --lease, plus the next claim) and until another worker finished them.
2. Throughput. The same study made by one process on SQLite (same budget,
   seed, --jobs 1), then by tune and WORKERS workers on PostgreSQL without
   faults, side by side: proposals and evaluations per second, and the ratio.
   The simulator's evaluations are cheap next to proposing, and all the
   processes share this machine's cores: this is the cost of sharing.
   Slow: the same with evaluations that take SLOW_EVAL_S seconds and no CPU
   (a command that sleeps, then scores the tile sizes), as a device's do:
   what more workers buy when evaluating is the bottleneck.
3. Quality. For each of SEEDS seeds, the best objective after QUALITY_BUDGET
   evaluations by one process on SQLite and by WORKERS processes (tune and
   WORKERS-1 workers) sharing a PostgreSQL study (no faults): the paired
   ratio shared/single.

Exits 1 when a fault figure is wrong (a lost or doubled result, a trial not
finished, fewer kills than --min-kills).

    benchmarks/shared_study.py --tessel build/ci/src/cli/tessel --json shared.json   # the figures
    benchmarks/shared_study.py --tessel PATH --quick                                 # the ctest
"""

import argparse
import json
import math
import os
import pathlib
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent
SPACE = ["tune", str(ROOT / "examples" / "matmul.tsl"), "--backend", "sim", "--target", "trn2"]


def slow_space(eval_s):
    """matmul's space measured by a command that takes eval_s seconds and no
    CPU (as a device does): a synthetic objective of the tile sizes."""
    score = ("$(( ({tile_m} - 512) * ({tile_m} - 512) + ({tile_n} - 256) * ({tile_n} - 256)"
             " + {tile_k} * {bufs} ))")
    return ["tune", str(ROOT / "examples" / "matmul.tsl"), "--target", "trn2",
            "--backend", f"command:sh -c 'sleep {eval_s}; echo {score}'"]


def psql(url, sql):
    """Rows of `sql` on the study `url` names (its ?study= schema), as lists of strings."""
    base, _, study = url.partition("?study=")
    out = subprocess.run(["psql", "-qAtX", "-F", "\t", base, "-c",
                          f"SET search_path TO {study or 'tessel'}; {sql}"],
                         check=True, capture_output=True, text=True).stdout
    return [line.split("\t") for line in out.splitlines() if line]


class cluster:
    def __init__(self, folder):
        self.folder = folder
        self.url = subprocess.run([str(ROOT / "scripts" / "pg_cluster"), "start", folder],
                                  check=True, capture_output=True, text=True).stdout.strip()

    def restart(self):
        subprocess.run([str(ROOT / "scripts" / "pg_cluster"), "restart", self.folder], check=True)

    def stop(self):
        subprocess.run([str(ROOT / "scripts" / "pg_cluster"), "stop", self.folder], check=False)


def summary_of(out):
    """The summary in `tune --json`'s output, its best objective as `best`."""
    s = json.loads(out)["summary"]
    s["best"] = s["best_objective"]
    return s


def single(tessel, folder, budget, seed, space=SPACE, label="single"):
    """One process on SQLite: its summary (tune --json)."""
    db = os.path.join(folder, f"{label}_{seed}_{budget}.tessel.db")
    out = subprocess.run([tessel, *space, "--budget", str(budget), "--seed", str(seed),
                          "--jobs", "1", "--db", db, "--json", "-q"],
                         check=True, capture_output=True, text=True).stdout
    return summary_of(out)


def start_worker(tessel, url, lease, name):
    return subprocess.Popen([tessel, "worker", url, "--jobs", "1", "--lease", str(lease),
                             "--heartbeat", str(lease / 6), "--wait", "60", "--name", name, "-q"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def try_psql(url, sql):
    """psql's rows, or None while the server restarts (or the study is not made yet)."""
    try:
        return psql(url, sql)
    except subprocess.CalledProcessError:
        return None


class orphans:
    """The trials a killed worker was running, followed until another worker
    has them: seconds from the kill until each went back to the queue (or to
    another worker) and until it was finished. Polled by the driving loop,
    so the times are late by at most one poll (~0.1 s plus a psql call)."""

    def __init__(self, url):
        self.url, self.open, self.requeue_s, self.finish_s = url, {}, [], []

    def killed(self, name, at):
        rows = try_psql(self.url, "SELECT t.id FROM trials t JOIN workers w ON w.id = t.worker_id "
                                  f"WHERE w.name = '{name}' AND t.state = 'running'") or []
        for (trial,) in rows:
            self.open[int(trial)] = {"worker": name, "killed": at, "requeued": None}

    def poll(self, now):
        if not self.open:
            return
        ids = ",".join(map(str, self.open))
        rows = try_psql(self.url, "SELECT t.id, t.state, coalesce(w.name, '') FROM trials t "
                                  f"LEFT JOIN workers w ON w.id = t.worker_id WHERE t.id IN ({ids})")
        for trial, state, worker in rows or []:
            o = self.open[int(trial)]
            if o["requeued"] is None and (state == "proposed" or worker != o["worker"]):
                o["requeued"] = now
                self.requeue_s.append(now - o["killed"])
            if state == "finished" and worker != o["worker"]:
                self.finish_s.append(now - o["killed"])
                del self.open[int(trial)]

    def figures(self):
        def spread(xs):
            xs = sorted(xs)
            if not xs:
                return {}
            return {"median": statistics.median(xs), "p90": xs[int(0.9 * (len(xs) - 1))],
                    "max": xs[-1]}
        return {"orphaned": len(self.requeue_s) + sum(o["requeued"] is None for o in self.open.values()),
                "not_requeued_at_end": sum(o["requeued"] is None for o in self.open.values()),
                "requeue_s": spread(self.requeue_s), "finished_again_s": spread(self.finish_s)}


def shared(tessel, url, budget, seed, workers, lease=3.0, kill_every=None, restart=None,
           space=SPACE):
    """tune + `workers` workers on one PostgreSQL study; with kill_every, a
    random worker is killed (and replaced) that often, and the trials it ran
    are followed (class orphans); `restart()` is called once half the budget
    is finished. Returns (tune's summary, wall s, kills, restarted, orphans)."""
    started = time.monotonic()
    tune = subprocess.Popen([tessel, *space, "--budget", str(budget), "--seed", str(seed),
                             "--jobs", "1", "--db", url, "--json", "-q"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    names = (f"bench{seed}-{n}" for n in range(1_000_000))
    pool = [(name, start_worker(tessel, url, lease, name))
            for name in (next(names) for _ in range(workers))]
    kills, restarted, next_kill = 0, False, time.monotonic() + (kill_every or 0)
    followed = orphans(url)
    rng = random.Random(seed)
    while tune.poll() is None:
        time.sleep(0.1)
        now = time.monotonic()
        followed.poll(now)
        if kill_every and now >= next_kill:
            i = rng.randrange(len(pool))
            name, victim = pool[i]
            if victim.poll() is None:
                victim.send_signal(signal.SIGKILL)
                victim.wait()
                kills += 1
                followed.killed(name, now)
            name = next(names)
            pool[i] = (name, start_worker(tessel, url, lease, name))
            next_kill = now + kill_every
        if restart and not restarted:
            done = try_psql(url, "SELECT count(*) FROM trials WHERE state = 'finished'")
            if done and int(done[0][0]) >= budget // 2:
                restart()
                restarted = True
    wall = time.monotonic() - started
    followed.poll(time.monotonic())
    out, err = tune.communicate()
    if tune.returncode != 0:
        sys.exit(f"tune failed ({tune.returncode}):\n{err}")
    failed = []
    for _, w in pool:
        try:
            _, werr = w.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            w.kill()
            _, werr = w.communicate()
        if w.returncode != 0:
            failed.append(werr)
    if failed:
        sys.exit("workers failed:\n" + "\n".join(failed))
    return summary_of(out), wall, kills, restarted, followed


def audit(url):
    """What the store says, read with psql."""
    row = psql(url, """
        SELECT count(*), coalesce(max(id), 0), count(DISTINCT key),
               count(*) FILTER (WHERE state = 'finished'),
               count(*) FILTER (WHERE state <> 'finished'),
               count(*) FILTER (WHERE state = 'finished' AND status IS NULL),
               coalesce(sum(claims), 0), coalesce(sum(requeues), 0),
               coalesce(sum(discarded), 0),
               count(*) FILTER (WHERE requeues > 0),
               (SELECT count(*) FROM workers),
               (SELECT count(DISTINCT worker_id) FROM trials)
        FROM trials""")[0]
    keys = ["trials", "max_id", "distinct_configs", "finished", "unfinished", "finished_no_result",
            "claims", "requeues", "discarded", "trials_requeued", "workers", "workers_with_results"]
    return dict(zip(keys, map(int, row)))


def interval(values):
    """Mean and a 95% t-interval half-width (n >= 2)."""
    n = len(values)
    mean = statistics.fmean(values)
    if n < 2:
        return mean, math.nan
    t = {2: 12.71, 3: 4.30, 4: 3.18, 5: 2.78, 6: 2.57, 7: 2.45, 8: 2.36, 9: 2.31, 10: 2.26}
    return mean, t.get(n, 2.0) * statistics.stdev(values) / math.sqrt(n)


def faults(a, tessel, server):
    """Phase 1: the fault run and what the store says after it."""
    url = server.url + "?study=faults"
    summary, wall, kills, restarted, followed = shared(
        tessel, url, a.evaluations, 1, a.workers, a.lease, a.kill_every, server.restart)
    found = audit(url)
    return {**found, "kills": kills, "server_restarted": restarted, "wall_s": wall,
            "best": summary["best"], **followed.figures(),
            "evaluations_per_s": found["claims"] / wall}


def throughput(a, tessel, server, tmp, space, label, budget):
    """Phase 2, side by side: one process on SQLite, then tune and
    a.workers workers on PostgreSQL without faults, same budget and seed."""
    base = single(tessel, tmp, budget, 1, space, label)
    url = server.url + f"?study={label}"
    _, wall, _, _, _ = shared(tessel, url, budget, 1, a.workers, a.lease, space=space)
    found = audit(url)
    single_rate, shared_rate = budget / base["wall_s"], found["claims"] / wall
    return {"budget": budget, "single_wall_s": base["wall_s"], "shared_wall_s": wall,
            "single_proposals_per_s": single_rate, "single_evaluations_per_s": single_rate,
            "shared_proposals_per_s": found["trials"] / wall,
            "shared_evaluations_per_s": shared_rate,
            "ratio_evaluations_per_s": shared_rate / single_rate,
            "shared_evaluated_again": found["claims"] - found["trials"],
            "single_best": base["best"]}


def quality(a, tessel, server, tmp):
    """Phase 3: per seed, the best objective of one process and of
    a.workers processes (tune and a.workers - 1 workers) on one budget."""
    ratios = []
    for seed in range(1, a.seeds + 1):
        one = single(tessel, tmp, a.quality_budget, seed)["best"]
        many = shared(tessel, server.url + f"?study=quality_{seed}", a.quality_budget, seed,
                      a.workers - 1)[0]["best"]
        ratios.append(many / one)
        print(f"seed {seed}: best single {one:.6g}, shared {many:.6g}", file=sys.stderr)
    mean, half = interval(ratios)
    return {"budget": a.quality_budget, "seeds": a.seeds, "ratios": ratios, "mean_ratio": mean,
            "ci95_half_width": half, "shared_better": sum(r < 1 for r in ratios),
            "single_better": sum(r > 1 for r in ratios)}


def fault_problems(a, f):
    """What is wrong with the fault run's figures ([] when nothing)."""
    problems = []
    if f["finished"] != a.evaluations or f["trials"] != a.evaluations:
        problems.append(f"{f['finished']} finished of {f['trials']} trials, budget {a.evaluations}")
    if f["unfinished"] or f["finished_no_result"]:
        problems.append(f"{f['unfinished']} trials unfinished, {f['finished_no_result']} without a result")
    if f["distinct_configs"] != f["trials"] or f["max_id"] != f["trials"]:
        problems.append("a config counted twice, or ids with gaps")
    if f["kills"] < a.min_kills:
        problems.append(f"only {f['kills']} kills (wanted {a.min_kills}): the run was too short")
    if f["not_requeued_at_end"]:
        problems.append(f"{f['not_requeued_at_end']} trials of killed workers never re-queued")
    if not f["server_restarted"]:
        problems.append("the server was not restarted")
    return problems


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--tessel", default=str(ROOT / "build" / "ci" / "src" / "cli" / "tessel"))
    p.add_argument("--evaluations", type=int, default=2000)
    p.add_argument("--workers", type=int, default=8)
    p.add_argument("--kill-every", type=float, default=2.0)
    p.add_argument("--min-kills", type=int, default=100)
    p.add_argument("--lease", type=float, default=3.0)
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--quality-budget", type=int, default=200)
    p.add_argument("--slow-eval-s", type=float, default=0.25,
                   help="seconds each evaluation of the slow throughput phase takes")
    p.add_argument("--slow-budget", type=int, default=300)
    p.add_argument("--phases", default="faults,throughput,slow,quality",
                   help="which of faults, throughput, slow, quality to run (comma-separated)")
    p.add_argument("--quick", action="store_true",
                   help="the ctest: 300 evaluations, 4 workers, a kill every 0.5 s, "
                        "40 slow evaluations, 3 seeds of 60")
    p.add_argument("--json")
    a = p.parse_args()
    if a.quick:
        a.evaluations, a.workers, a.kill_every, a.min_kills = 300, 4, 0.5, 5
        a.seeds, a.quality_budget, a.lease, a.slow_budget = 3, 60, 2.0, 40
    phases = set(a.phases.split(","))
    unknown = phases - {"faults", "throughput", "slow", "quality"}
    if unknown:
        p.error(f"unknown phases: {', '.join(sorted(unknown))}")
    tessel = os.path.abspath(a.tessel)
    report = {"evaluations": a.evaluations, "workers": a.workers, "kill_every_s": a.kill_every}
    with tempfile.TemporaryDirectory(prefix="tessel_shared_") as tmp:
        os.chmod(tmp, 0o755)  # the server's user (postgres, under root) enters it
        server = cluster(os.path.join(tmp, "pg"))
        try:
            if "faults" in phases:
                report["faults"] = faults(a, tessel, server)
            if "throughput" in phases:
                report["throughput"] = throughput(a, tessel, server, tmp, SPACE, "throughput",
                                                  a.evaluations)
            if "slow" in phases:
                report["slow_throughput"] = {
                    "eval_s": a.slow_eval_s,
                    **throughput(a, tessel, server, tmp, slow_space(a.slow_eval_s), "slow",
                                 a.slow_budget)}
            if "quality" in phases:
                report["quality"] = quality(a, tessel, server, tmp)
        finally:
            server.stop()

    problems = fault_problems(a, report["faults"]) if "faults" in report else []
    report["problems"] = problems
    print(json.dumps(report, indent=2))
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps(report, indent=2) + "\n")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
