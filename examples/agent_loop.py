#!/usr/bin/env python3
"""Drive `tessel serve` the way an LLM agent loop would (plain Python 3, no packages).

The agent reads the space, proposes a few candidates of its own (with the
tokens it spent and its rationale), asks tessel for more, evaluates them,
tells tessel the results, and reads the best config and the summary back.

Two modes:
  * without --backend, the agent measures candidates itself (here with a toy
    cost model standing in for "compile and run the NKI kernel") and tells
    tessel the results: tessel ranks, dedupes and remembers;
  * with --backend SPEC (e.g. `sim`, `replay:FILE`, `command:'...'`), the agent
    asks tessel to evaluate: `{"op": "evaluate", "config": ...}`.

  python3 examples/agent_loop.py --tessel build/release/src/cli/tessel \
          --space examples/matmul.tsl --rounds 5
"""
import argparse
import json
import subprocess
import sys


class Tessel:
    """One `tessel serve` process; request() sends a JSON line, returns the reply."""

    def __init__(self, argv):
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.next_id = 0

    def request(self, op, **fields):
        self.next_id += 1
        message = dict(op=op, id=self.next_id, **fields)
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            sys.exit("tessel serve ended unexpectedly")
        reply = json.loads(line)
        if reply.get("id") != self.next_id:
            sys.exit(f"reply out of order: {reply}")
        return reply

    def close(self):
        self.request("quit")
        self.proc.stdin.close()
        self.proc.wait(timeout=10)


def toy_cost(config, constants):
    """Seconds for a tiled matmul: a crude roofline the 'agent' uses to measure.

    A real agent would compile the NKI kernel and run it; this keeps the example
    self-contained. Small tiles pay DMA overheads; big ones run near peak.
    """
    m, n, k = constants["M"], constants["N"], constants["K"]
    tm, tn, tk = config["tile_m"], config["tile_n"], config["tile_k"]
    flops = 2.0 * m * n * k
    compute = flops / 78e12 / min(1.0, (tn / 512.0) ** 0.5)
    reloads = (n / tn) * m * k * 2 + (m / tm) * k * n * 2
    memory = reloads / 368e9 + (m / tm) * (n / tn) * (k / tk) * 2 * 1.3e-6 / 16 / config["bufs"]
    return max(compute, memory) * (1.05 if config["evict"] == "gpsimd" else 1.0)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tessel", default="build/release/src/cli/tessel", help="path of the tessel tool")
    parser.add_argument("--space", default="examples/matmul.tsl", help="the .tsl file")
    parser.add_argument("--backend", default="", help="let tessel evaluate with this backend")
    parser.add_argument("--rounds", type=int, default=5, help="ask/tell rounds")
    parser.add_argument("--batch", type=int, default=4, help="suggestions per round")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    argv = [args.tessel, "serve", args.space, "--no-db", "--seed", str(args.seed)]
    if args.backend:
        argv += ["--backend", args.backend]
    tessel = Tessel(argv)

    space = tessel.request("space")["space"]
    print(f"space {space['name']}: {space['valid_configs']} valid configs, "
          f"{len(space['parameters'])} parameters", file=sys.stderr)
    constants = {"M": 4096, "N": 4096, "K": 4096}

    def measure(config):
        if args.backend:
            return tessel.request("evaluate", config=config)["trial"]
        return None

    # 1. The agent's own ideas first, with what they cost it to think of.
    ideas = [
        ({"tile_m": 512, "tile_n": 512, "tile_k": 512, "order": ["m", "n", "k"], "a_home": "sbuf",
          "bufs": 2, "evict": "vector"}, "square 512 tiles, A resident"),
        ({"tile_m": 128, "tile_n": 128, "tile_k": 128, "order": ["m", "n", "k"], "a_home": "sbuf",
          "bufs": 1, "evict": "scalar"}, "the tutorial's smallest tiles"),
        ({"tile_m": 4096, "tile_n": 512, "tile_k": 128, "order": ["k", "m", "n"], "a_home": "sbuf",
          "bufs": 2, "evict": "vector"}, "an invalid one: tile_m is not in its domain"),
    ]
    for config, note in ideas:
        reply = tessel.request("enqueue", config=config, source="agent", tokens=180, note=note)
        if not reply["ok"]:
            print(f"tessel rejected an idea: {reply['error']}", file=sys.stderr)

    # 2. Ask/evaluate/tell rounds: tessel's strategy fills in after the agent's ideas.
    for round_ in range(args.rounds):
        suggestions = tessel.request("ask", n=args.batch)["suggestions"]
        for s in suggestions:
            if args.backend:
                continue
            seconds = toy_cost(s["config"], constants)
            tessel.request("tell", trial_id=s["trial_id"], objective=seconds,
                           cost={"compile_s": 2.0, "run_s": seconds * 20})
        if args.backend:  # suggestions were asked: tell them through the backend
            for s in suggestions:
                trial = measure(s["config"])
                print(f"  evaluated trial {trial['trial_id']}: {trial['status']}", file=sys.stderr)
        best = tessel.request("best")["best"]
        if best:
            print(f"round {round_ + 1}: best {best['objective']:.6g} s from {best['source']}: "
                  f"{json.dumps(best['config'])}")

    # 3. A malformed request gets an error reply, never a crash.
    print("malformed request ->", tessel.request("tell", trial_id="seven")["error"][:60], file=sys.stderr)

    summary = tessel.request("summary")["summary"]
    print(f"{summary['evaluations']} evaluations; best {summary['best_objective']}")
    tessel.close()


if __name__ == "__main__":
    main()
