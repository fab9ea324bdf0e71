#!/usr/bin/env python3
"""An agent loop over the `tessel` Python package (docs/agents.md).

The "agent" here is a few lines of heuristics standing in for an LLM: it reads
the typed space, proposes its own candidates (with the tokens they cost it),
asks tessel for more, measures them itself with a toy cost model (standing in
for compiling and running an NKI kernel), tells tessel the results, asks the
simulator why the best is slow, and finally lets tessel re-measure the
agent-reported best on the simulator (verify) before trusting it.

  PYTHONPATH=build/ci/python python3 examples/python_agent_loop.py [--rounds 4]
"""
import argparse
import pathlib

import tessel

HERE = pathlib.Path(__file__).resolve().parent


def toy_seconds(config, constants):
    """What the agent 'measures': a crude roofline of a tiled bf16 matmul."""
    m, n, k = constants["M"], constants["N"], constants["K"]
    tm, tn, tk = config["tile_m"], config["tile_n"], config["tile_k"]
    compute = 2.0 * m * n * k / 78e12 / min(1.0, (tn / 512.0) ** 0.5)
    reloads = (n / tn) * m * k * 2 + (m / tm) * k * n * 2
    bufs = (config["a_bufs"] + config["b_bufs"]) / 2
    dma = (m / tm) * (n / tn) * (k / tk) * 2 * 1.3e-6 / 16 / bufs
    return max(compute, reloads / 368e9 + dma)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--space", default=str(HERE / "sim_matmul.tsl"))
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    space = tessel.load_space(args.space)
    described = space.describe()
    constants = described["constants"]
    print(f"space {space.name}: {space.count()} valid configs; parameters "
          + ", ".join(f"{p['name']} ({p['kind']})" for p in described["parameters"]))

    # The simulator is the backend tessel verifies on; the agent measures itself.
    study = tessel.Study(space, backend="sim", seed=args.seed, verify=True, token_price=0.01)

    # 1. The agent's own ideas, with their token cost. Left-out parameters take defaults.
    for idea, note in [({"tile_m": 128, "tile_n": 512, "tile_k": 128}, "one PSUM bank per tile"),
                       ({"tile_m": 128, "tile_n": 2048, "a_bufs": 3, "b_bufs": 3},
                        "wide tiles, triple-buffered")]:
        trial_id = study.enqueue(idea, tokens=350, note=note)
        print(f"enqueued trial {trial_id}: {note}")

    # 2. ask -> measure -> tell rounds.
    for round_ in range(args.rounds):
        for s in study.ask(args.batch):
            p = s["prediction"]
            seconds = toy_seconds(s["config"], constants)
            study.tell(s["trial_id"], objective=seconds, tokens=40,
                       cost={"compile_s": 2.0, "run_s": 20 * seconds})
            mean = "-" if p["mean"] is None else f"{p['mean']:.3g}"
            print(f"round {round_ + 1}: trial {s['trial_id']:>2} from {s['source']:<10} "
                  f"predicted {mean} ({p['basis']}), told {seconds:.3g} s")

    # 3. Nothing told is the answer until the backend re-measures it.
    print("best before verify:", study.best)
    verified = 0
    while study.best is None and study.verify(max=1) == 1:  # best told first
        verified += 1
    for t in study.trials:
        if "reported_objective" in t.get("metrics", {}):
            print(f"  re-measured trial {t['trial_id']}: told "
                  f"{t['metrics']['reported_objective']:.3g} s, simulator says {t['status']}"
                  + (f" {t['objective']:.3g} s" if t["status"] == "ok" else f": {t.get('message', '')[:70]}"))
    best = study.best
    print(f"verify re-measured {verified} told results; the best is trial {best['trial_id']}: "
          f"{best['objective']:.4g} s on the simulator")

    # 4. Why is it as fast as it is?
    e = study.explain()
    print(f"bottleneck: {e['bottleneck']}")
    for line in e["suggestions"][:3]:
        print(f"  - {line}")
    summary = study.summary()
    print(f"{summary['evaluations']} evaluations, {summary['tokens']:.0f} tokens, "
          f"{summary['reported']} still unverified")


if __name__ == "__main__":
    main()
