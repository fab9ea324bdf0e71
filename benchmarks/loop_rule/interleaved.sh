#!/bin/bash
# benchmarks/loop_rule/interleaved.sh BEFORE_TESSEL AFTER_TESSEL [REPS]: the cpu
# backend's honest kernels timed by two tessel binaries, interleaved (before,
# after, before, ...), REPS rounds (default 5): each line is the "best config
# re-measured" median of `tessel tune CASE --budget 1 --seed 1` (20 samples).
# Each binary keeps its own compile cache under ${TMPDIR:-/tmp}. Round seven
# (docs/gate.md, benchmarks/README.md's gate section).
set -euo pipefail
before=$1 after=$2 reps=${3:-5}
examples="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../examples" && pwd)"
cache="${TMPDIR:-/tmp}/tessel-loop-rule-bench"
run() {  # name binary cache-folder args...
  local name=$1 bin=$2 dir=$3
  shift 3
  local line
  line=$(nice -n 10 "$bin" tune "$@" --budget 1 --seed 1 --no-db --backend-set "cache_dir=$dir" 2>&1 |
         grep 'best config re-measured' || echo "median (failed) over")
  echo "$name $(sed -E 's/.*median (.+) over.*/\1/' <<<"$line")"
}
transpose="--backend cpu:kernel=$examples/cpu/transpose.cpp:transpose,reference=$examples/cpu/transpose.cpp:transpose_reference,inputs=A:ROWSxCOLS,outputs=B:COLSxROWS"
cases=(
  "tiny|$examples/cpu/transpose.tsl --set ROWS=8 --set COLS=8 $transpose"
  "t32|$examples/cpu/transpose.tsl --set ROWS=32 --set COLS=32 $transpose"
  "softmax|$examples/cpu_softmax.tsl --set R=64 --set D=512 --backend cpu"
  "rmsnorm|$examples/cpu_rmsnorm.tsl --set R=64 --set D=512 --backend cpu"
  "gemm|$examples/cpu_gemm.tsl --set M=128 --set N=96 --set K=64 --backend cpu"
)
for rep in $(seq "$reps"); do
  for c in "${cases[@]}"; do
    name=${c%%|*}
    read -r -a args <<<"${c#*|}"
    run "$rep $name before" "$before" "$cache/before" "${args[@]}"
    run "$rep $name after" "$after" "$cache/after" "${args[@]}"
  done
done
