#!/usr/bin/env python3
"""Leave-one-family-out selection of a default (issue 32).

Reads `bench_strategy_quality --json` outputs (their per-seed scores) whose
strategies are the candidate defaults, one of them the default of the day
(--control, `auto` unless told). A table's kernel family is the first word of
its name (convolution, dedispersion, gemm, pnpoly), so three convolution
tables cannot vote for what suits convolution. For each family left out,
the candidate with the best mean score on the OTHER families is chosen,
each family weighing the same (the mean of its tables), every cell (mode
and budget fraction) weighing the same; the table then shows that
candidate's score on the left-out family, cell by cell, beside the
control's and the difference with its 95% interval (paired by seed: the
same seed runs every candidate, and a family's seed score is the mean of
its tables').

  benchmarks/leave_one_family_out.py [--control auto] RESULT.json [RESULT.json ...]

Results of disjoint seed ranges (--first-seed) and of single tables (--spaces)
merge: a table's seeds are the union of the files' (the same seed read twice:
the later file wins), and a family is scored on the seeds that every
candidate ran in every cell of each of its tables. The held-out difference
over all families is the mean of the families' (each an independent
estimate: other tables), with a normal 95% interval.
"""
import argparse
import json
import math
import statistics

T975 = {1: 12.71, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262,
        10: 2.228, 15: 2.131, 20: 2.086, 30: 2.042, 40: 2.021, 60: 2.000, 120: 1.980}


def t975(df):
    """Student's t 97.5% quantile (the nearest tabled df at or below; 1.96 past 120)."""
    return T975[max(k for k in T975 if k <= df)] if df <= 120 else 1.96


def interval(values):
    """(mean, half width of the 95% interval) of paired differences."""
    mean = statistics.fmean(values)
    if len(values) < 2:
        return mean, math.inf
    return mean, t975(len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values))


def family(space):
    return space.split("_")[0]


def load(paths):
    """cell -> strategy -> space -> {seed: score}, and the same for 'outside after 50'."""
    seeds, outside = {}, {}
    for path in paths:
        with open(path) as f:
            data = json.load(f)
        first = data.get("first_seed", 1)
        for cell, by_strategy in data["per_seed"].items():
            for strategy, by_space in by_strategy.items():
                for space, values in by_space.items():
                    cell_seeds = seeds.setdefault(cell, {}).setdefault(strategy, {})
                    cell_seeds.setdefault(space, {}).update(
                        {first + i: v for i, v in enumerate(values)})
                    outside.setdefault(cell, {}).setdefault(strategy, {}).setdefault(
                        space, {})[first] = (len(values), data["outside_after_50"][cell][strategy][space])
    late = {cell: {strategy: {space: sum(n * v for n, v in r.values()) / sum(n for n, _ in r.values())
                              for space, r in by_space.items()}
                   for strategy, by_space in by_strategy.items()}
            for cell, by_strategy in outside.items()}
    return seeds, late


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--control", default="auto", help="the default of the day")
    parser.add_argument("results", nargs="+")
    args = parser.parse_args()
    seeds, late = load(args.results)
    cells = sorted(seeds, key=lambda c: (not c.startswith("table"), -float(c.partition("@")[2] or 1)))
    candidates = sorted(set.intersection(*(set(seeds[c]) for c in cells)))
    if args.control not in candidates:
        raise SystemExit(f"--control {args.control} is not among the candidates: {candidates}")
    spaces = sorted(set.intersection(*(set(seeds[c][s]) for c in cells for s in candidates)))
    families = sorted({family(s) for s in spaces})
    members = {f: [s for s in spaces if family(s) == f] for f in families}
    # A family's seeds: those every candidate ran in every cell of each of its tables.
    common = {f: sorted(set.intersection(*(set(seeds[c][s][t]) for c in cells for s in candidates
                                          for t in members[f]))) for f in families}

    def per_seed(cell, candidate, fam):
        """The family's score for each of its seeds: the mean over its tables."""
        return [statistics.fmean(seeds[cell][candidate][t][k] for t in members[fam])
                for k in common[fam]]

    def difference(cell, candidate, fam):
        """(mean, variance of the mean) of candidate - control on a family, paired by seed."""
        diff = [a - b for a, b in zip(per_seed(cell, candidate, fam),
                                      per_seed(cell, args.control, fam))]
        var = statistics.variance(diff) / len(diff) if len(diff) > 1 else math.inf
        return statistics.fmean(diff), var, len(diff)

    def score(candidate, fam, cell):
        return statistics.fmean(per_seed(cell, candidate, fam))

    def criterion(candidate, among):
        return statistics.fmean(score(candidate, f, c) for f in among for c in cells)

    print("candidates: " + ", ".join(candidates))
    print(f"control: {args.control}; cells: " + ", ".join(cells))
    print("seeds per family: " + ", ".join(f"{f} {len(common[f])}" for f in families))
    print(f"\n{'left out':<14}{'cell':<14}{'chosen on the others':<58}{'held out':>9}"
          f"{'control':>9}{'difference [95% interval]':>30}{'outside':>9}")
    held = {c: [] for c in cells}
    folds = {c: [] for c in cells}  # each fold's (difference, variance)
    for fam in families:
        others = [f for f in families if f != fam]
        chosen = max(candidates, key=lambda c: criterion(c, others))
        for cell in cells:
            mean, var, n = difference(cell, chosen, fam)
            half = t975(n - 1) * math.sqrt(var) if n > 1 else math.inf
            held[cell].append(score(chosen, fam, cell))
            folds[cell].append((mean, var))
            out = statistics.fmean(late[cell][chosen][t] for t in members[fam])
            print(f"{fam:<14}{cell:<14}{chosen:<58}{held[cell][-1]:>9.3f}"
                  f"{score(args.control, fam, cell):>9.3f}"
                  f"{f'{mean:+.3f} [{mean - half:+.3f}, {mean + half:+.3f}]':>30}"
                  + (f"{100 * out:>8.1f}%" if cell.startswith("product") else f"{'':>9}"))

    def pooled(parts):
        """The mean of independent per-family estimates and its 95% interval (normal)."""
        mean = statistics.fmean(m for m, _ in parts)
        half = 1.96 * math.sqrt(sum(v for _, v in parts)) / len(parts)
        return f"{mean:+.3f} [{mean - half:+.3f}, {mean + half:+.3f}]"

    print("\nheld out: the mean over the folds, their spread, and the difference from the "
          "control\n(the mean of the folds' differences, each family weighing the same):")
    for cell in cells:
        print(f"  {cell:<14} mean {statistics.fmean(held[cell]):.3f}  min {min(held[cell]):.3f}  "
              f"max {max(held[cell]):.3f}  difference {pooled(folds[cell])}")
    print(f"\neach table, every candidate's mean score ({', '.join(cells)}):")
    for t in spaces:
        for candidate in candidates:
            print(f"  {t:<26}{candidate:<58}" + "".join(
                f"{statistics.fmean(seeds[c][candidate][t].values()):>8.3f}" for c in cells))
    print("\nin sample (every family weighing the same), each candidate less the control:")
    for candidate in (c for c in candidates if c != args.control):
        for cell in cells:
            parts = [difference(cell, candidate, f)[:2] for f in families]
            print(f"  {candidate:<58}{cell:<14}{pooled(parts)}")

if __name__ == "__main__":
    main()
