#!/usr/bin/env bash
# benchmarks/early_failures.sh: failed evaluations early in the simulator demo,
# the utility scheduler (default) against fifo (docs/scheduler.md, "Early
# failures"). Six seeds of `tessel tune examples/matmul.tsl --backend sim
# --target trn2 --budget 100`; prints failures among the first 25 and 50
# trials and among all 100, per seed and on average.
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
awk '{ k = $1; a[k] += $5; b[k] += $10; c[k] += $13; n[k]++ }
  END { for (k in a) printf "%-8s mean:   %.1f of the first 25, %.1f of 50, %.1f of 100\n",
        k, a[k] / n[k], b[k] / n[k], c[k] / n[k] }' "$work/lines"
