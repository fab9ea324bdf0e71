#!/usr/bin/env bash
# benchmarks/early_failures.sh: failed evaluations early in the simulator demo,
# the utility scheduler (default) against fifo (docs/scheduler.md, "Early
# failures"). Six seeds of `tessel tune examples/matmul.tsl --backend sim
# --target trn2 --budget 100`; prints failures among the first 25 and 50
# trials and among all 100, per seed and on average, and utility minus fifo
# paired by seed with its standard error.
#   benchmarks/early_failures.sh [TESSEL]   (default build/release/src/cli/tessel)
#   SEEDS="7 8 9 10 11 12" benchmarks/early_failures.sh ...   other seeds (default 1-6)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
tessel=${1:-build/release/src/cli/tessel}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for scheduler in utility fifo; do
  for seed in ${SEEDS:-1 2 3 4 5 6}; do
    db="$work/$scheduler$seed.db"
    "$tessel" tune examples/matmul.tsl --backend sim --target trn2 --budget 100 --seed "$seed" \
      --scheduler "$scheduler" --quiet --db "$db" >/dev/null
    "$tessel" export "$db" --format csv |
      awk -F, -v s="$scheduler" -v seed="$seed" 'NR > 1 {
          n++; if ($4 != "ok") { all++; if (n <= 25) a++; if (n <= 50) b++ } }
        END { printf "%-8s seed %d: failed %2d of the first 25, %2d of 50, %2d of %d\n",
              s, seed, a, b, all, n }'
  done
done | tee "$work/lines"
# Means per scheduler, then utility minus fifo paired by seed: the mean
# difference and its standard error (the per-seed spread is large, so a gap
# needs many seeds to mean much). One pass over the per-seed lines.
awk '{ k = $1; s = $3 + 0; n[k]++; seen[s] = 1
       for (j = 1; j <= 3; j++) { x = j == 1 ? $5 : j == 2 ? $10 : $13; total[k, j] += x; v[k, s, j] = x } }
  END {
    for (k in n) printf "%-8s mean:   %.2f of the first 25, %.2f of 50, %.2f of 100\n",
      k, total[k, 1] / n[k], total[k, 2] / n[k], total[k, 3] / n[k]
    for (s in seen) { m++; for (j = 1; j <= 3; j++) {
      d = v["utility", s, j] - v["fifo", s, j]; sum[j] += d; sq[j] += d * d } }
    printf "utility - fifo, paired by seed (%d seeds):", m
    split("first 25,first 50,all 100", label, ",")
    for (j = 1; j <= 3; j++) {
      mean = sum[j] / m; se = m > 1 ? sqrt((sq[j] - m * mean * mean) / (m - 1) / m) : 0
      printf " %+.2f +- %.2f (%s)", mean, se, label[j] }
    printf "\n" }' "$work/lines"
