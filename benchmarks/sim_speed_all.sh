#!/usr/bin/env bash
# benchmarks/sim_speed_all.sh: issue 28 item 1's sweep. For every simulator
# example on trn2 and trn2_lnc2, the analytic (steady-state) model's
# compiling configs per CPU s and its agreement with the event model, from
# `bench_sim_speed --configs N --models-only` (N default 100), REPS rounds
# (default 2). One line per run:
#   ROUND SPACE TARGET analytic=RATE event=RATE tau=KENDALL rho=SPEARMAN load=LOADAVG
#
#   benchmarks/sim_speed_all.sh BUILD_DIR [N] [REPS]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build=${1:?usage: benchmarks/sim_speed_all.sh BUILD_DIR [N] [REPS]}
configs=${2:-100}
reps=${3:-2}
spaces=()
for f in examples/*.tsl; do
  case $(basename "$f") in cpu_*) continue ;; esac  # the host CPU's spaces: no simulator
  spaces+=("$f")
done
for round in $(seq 1 "$reps"); do
  for f in "${spaces[@]}"; do
    for t in trn2 trn2_lnc2; do
      out=$("$build/benchmarks/bench_sim_speed" --configs "$configs" --models-only --file "$f" --target "$t")
      rate() { awk -v m="$1" '$1 == m && $2 ~ /^[0-9]+$/ {print $3; exit}' <<<"$out"; }
      agree=$(grep -o 'Kendall tau [0-9.]*, Spearman rho [0-9.]*' <<<"$out" | awk '{print "tau=" $3 " rho=" $6}' | tr -d ,)
      echo "$round $(basename "$f" .tsl) $t analytic=$(rate analytic) event=$(rate event) $agree load=$(cut -d' ' -f1 /proc/loadavg)"
    done
  done
done
