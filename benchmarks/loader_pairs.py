#!/usr/bin/python3
"""Interleaved before/after timings of two cpu loaders on one kernel library.

Runs loader A then loader B on the same kernel and input, PAIRS times, and prints
each pair's median samples and their ratio B / A, then the median ratio
(benchmarks/README.md, "Gate round twelve"), and, for a loader B that reports
it (judged_copy_s), the time its parent spent copying the judged call's outputs,
beside the samples, as a share of the samples' time. Build the loaders and the library
by hand, e.g. (from the repository root, OLD the commit before):

  git show OLD:backends/cpu/loader.cpp > /tmp/b/loader_a.cpp   # a one-file loader
  g++ -std=c++20 -O2 -pthread -Iinclude /tmp/b/loader_a.cpp -ldl -o /tmp/b/loader_a
  g++ -std=c++20 -O2 -pthread -Iinclude backends/cpu/loader.cpp -ldl -o /tmp/b/loader_b
  # t.so: examples/cpu/transpose.cpp with an entry tessel_cpu_entry calling transpose
  g++ -std=c++20 -O2 -fPIC -shared -Iinclude unit.cpp -o /tmp/b/t.so

Inputs are .npy files of SIZE x SIZE float32 (aSIZE.npy in the folder). A CPU
list pins both loaders with taskset; "none" leaves them unpinned. --b-args adds
options to loader B's command line only (e.g. "--kernel-user 65534:65534",
the user a root loader's kernel process becomes: benchmarks/README.md, "Gate
round sixteen").
"""
import argparse
import json
import statistics
import subprocess
from pathlib import Path


def median_sample(loader, folder, size, repeats, pin, extra=()):
    folder = folder.resolve()
    out = folder / f"b_{loader.name}.npy"
    command = ([] if pin == "none" else ["taskset", "-c", pin]) + [
        str(loader.resolve()), str(folder / "t.so"), "time",
        "--in", "fp32", f"{size}x{size}", str(folder / f"a{size}.npy"),
        "--out", "fp32", f"{size}x{size}", str(out),
        "--warmup", "2", "--min-sample", "1e-3", "--min-repeats", str(repeats),
        "--max-repeats", str(repeats), "--margin", "0", "--target-ci", "0.02",
        "--max-seconds", "100", "--incumbent", "0", "--loop-seed", "5", *extra]
    text = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, check=False).stdout
    answer = json.loads(text.strip().splitlines()[-1])
    if answer["status"] != "ok":
        raise SystemExit(f"{loader}: {answer}")
    return statistics.median(answer["samples_s"]), answer


def copy_share(answer):
    """The judged call's copies (judged_copy_s, a loader that reports it) as a
    share of the timed samples' time (every sample's calls), or None."""
    if "judged_copy_s" not in answer:
        return None
    timed = sum(answer["samples_s"]) * answer["iters"]
    return answer["judged_copy_s"], answer["judged_copy_s"] / timed


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("folder", type=Path, help="holds t.so and aSIZE.npy")
    p.add_argument("a", type=Path, help="the loader before")
    p.add_argument("b", type=Path, help="the loader after")
    p.add_argument("--size", type=int, default=8)
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--pairs", type=int, default=11)
    p.add_argument("--pin", default="none", help="a CPU list for taskset, or none")
    p.add_argument("--b-args", default="", help="options for loader B only, split on spaces")
    args = p.parse_args()
    ratios, shares = [], []
    for pair in range(args.pairs):
        a, _ = median_sample(args.a, args.folder, args.size, args.repeats, args.pin)
        b, answer = median_sample(args.b, args.folder, args.size, args.repeats, args.pin,
                                  args.b_args.split())
        ratios.append(b / a)
        copies = copy_share(answer)
        note = "" if copies is None else (
            f"  b's copies {copies[0] * 1e6:.1f} us, {copies[1]:.5f} of its samples' time")
        shares += [] if copies is None else [copies[1]]
        print(f"pair {pair + 1}: a {a * 1e9:.2f} ns  b {b * 1e9:.2f} ns  b/a {b / a:.3f}{note}",
              flush=True)
    print(f"median b/a {statistics.median(ratios):.3f}")
    if shares:
        print(f"median share of b's copies {statistics.median(shares):.5f}")


if __name__ == "__main__":
    main()
