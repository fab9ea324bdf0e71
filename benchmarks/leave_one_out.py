#!/usr/bin/env python3
"""Leave-one-space-out selection of a default (issue 13).

Reads one or more `bench_strategy_quality --json` outputs (or its stderr
progress lines, from a run without --json) whose strategies are
the candidate defaults (e.g. auto, auto@60, ...). For each left-out space it
chooses the candidate with the best mean score on the OTHER spaces (both
modes averaged, since a default must serve both) and reports that
candidate's score on the left-out space: the held-out score. Spaces that hold
the same measurements (convolution_milo_A100 and its T4 copy) are left out
together, so the copy cannot leak the left-out space into the choice.

  benchmarks/leave_one_out.py RESULT.json [RESULT.json ...]
  benchmarks/leave_one_out.py first.err@1:30 more.err@31:30   # seed ranges

A RESULT may name its seed range as PATH@FIRST:COUNT (the run's
--first-seed and --seeds). A cell measured over several distinct ranges
scores their mean weighted by seed count (the score is linear in the mean
trajectory); the same range read twice counts once (the later file wins).
"""
import json
import sys

# Spaces holding the same measurements: left out together.
SAME = {"convolution_milo_A100": "convolution_milo_A100_T4",
        "convolution_milo_A100_T4": "convolution_milo_A100"}


def parse_progress(text):
    """The same data from bench_strategy_quality's stderr (run without --json)."""
    data = {"scores": {}, "outside_after_50": {}}
    space = None
    for line in text.splitlines():
        if not line.startswith(" ") and ": " in line and " valid of " in line:
            space = line.split(":")[0]
            continue
        words = line.split()
        if space and len(words) >= 7 and words[2] == "score" and words[4] == "outside":
            mode, strategy = words[0], words[1]
            data["scores"].setdefault(mode, {}).setdefault(strategy, {})[space] = float(words[3])
            data["outside_after_50"].setdefault(mode, {}).setdefault(strategy, {})[space] = \
                float(words[7].rstrip("%")) / 100
    return data


def load(paths):
    # mode -> strategy -> space -> seed range -> (seeds, value)
    cells = {"scores": {}, "outside_after_50": {}}
    for arg in paths:
        path, _, seeds = arg.partition("@")
        first, _, count = seeds.partition(":")
        with open(path) as f:
            text = f.read()
        data = json.loads(text) if text.lstrip().startswith("{") else parse_progress(text)
        weight = int(count) if count else data.get("seeds", 1)
        for table in cells:
            for mode, by_strategy in data[table].items():
                for strategy, by_space in by_strategy.items():
                    for space, value in by_space.items():
                        cells[table].setdefault(mode, {}).setdefault(strategy, {}).setdefault(
                            space, {})[first or "1"] = (weight, value)

    def combined(table):
        return {mode: {strategy: {space: sum(w * v for w, v in ranges.values())
                                  / sum(w for w, _ in ranges.values())
                                  for space, ranges in by_space.items()}
                       for strategy, by_space in by_strategy.items()}
                for mode, by_strategy in cells[table].items()}

    scores, outside = combined("scores"), combined("outside_after_50")
    # A space missing from a run whose twin holds the same measurements takes
    # the twin's scores: replay is deterministic, so the runs are identical.
    for table in (scores, outside):
        for by_strategy in table.values():
            for by_space in by_strategy.values():
                for space, twin in SAME.items():
                    if space not in by_space and twin in by_space:
                        by_space[space] = by_space[twin]
    return scores, outside


def main(paths):
    scores, outside = load(paths)
    modes = sorted(scores)
    candidates = sorted(set.intersection(*(set(scores[m]) for m in modes)))
    spaces = sorted(set.intersection(*(set(scores[m][c]) for m in modes for c in candidates)))

    def mean_on(candidate, among):
        values = [scores[m][candidate][s] for m in modes for s in among]
        return sum(values) / len(values)

    print("candidates:", ", ".join(candidates))
    width = max(44, 2 + max(len(c) for c in candidates))
    print(f"{'left out':<28}{'chosen on the others':<{width}}"
          + "".join(f"{'held-out ' + m:>18}" for m in modes)
          + ("" if "product" not in modes else f"{'outside after 50':>18}"))
    held = {m: [] for m in modes}
    late = []
    for left in spaces:
        others = [s for s in spaces if s != left and s != SAME.get(left)]
        chosen = max(candidates, key=lambda c: mean_on(c, others))
        row = f"{left:<28}{chosen:<{width}}"
        for m in modes:
            held[m].append(scores[m][chosen][left])
            row += f"{scores[m][chosen][left]:>18.3f}"
        if "product" in modes:
            late.append(outside["product"][chosen][left])
            row += f"{100 * late[-1]:>17.1f}%"
        print(row)
    row = f"{'mean (held out)':<{28 + width}}"
    for m in modes:
        row += f"{sum(held[m]) / len(held[m]):>18.3f}"
    if late:
        row += f"{100 * sum(late) / len(late):>17.1f}%"
    print(row)
    print("\nin-sample means (every space), for comparison:")
    for c in candidates:
        print(f"  {c:<{width}}" + "".join(
            f"{m} {sum(scores[m][c][s] for s in spaces) / len(spaces):.3f}  " for m in modes))


if __name__ == "__main__":
    main(sys.argv[1:])
