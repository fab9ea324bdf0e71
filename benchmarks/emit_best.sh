#!/usr/bin/env bash
# benchmarks/emit_best.sh: `tessel emit --best` after `tessel tune`, as a user
# runs them, for every example space the simulator takes and every target
# (docs/nki.md, "Coverage"; issue 31: the best config of every example must
# emit, on every target the simulator times it on).
#
#   benchmarks/emit_best.sh BUILD_DIR [BUDGET] [TARGET...]
#
# For each examples/*.tsl the sim backend takes on trn2 (the others, such as
# the cpu spaces, are listed as skipped) and each TARGET (default
# trn2 trn2_lnc2 trn2_chip), at the example's full shape:
#   tessel tune EXAMPLE --backend sim --target T --budget BUDGET (default 8) --seed 1
#   tessel emit EXAMPLE --best STUDY --target T
#   python3 tests/nki/check_emitted.py --count KERNEL
# (the kernel's counts against its STRUCTURE: counted, not computed, so any
# shape takes seconds). Prints one line per example and target (ok or the
# step that failed, with its first line of error) and exits 1 when any failed.
# EMIT_BEST_KEEP=1 keeps the studies and kernels (in the folder it names).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build=${1:?usage: benchmarks/emit_best.sh BUILD_DIR [BUDGET] [TARGET...]}
budget=${2:-8}
shift $(($# < 2 ? $# : 2))
targets=("$@")
((${#targets[@]})) || targets=(trn2 trn2_lnc2 trn2_chip)
python=/usr/bin/python3
[[ -x $python ]] || python=python3
tessel="$build/src/cli/tessel"
[[ -x $tessel ]] || {
  echo "emit_best: no tessel binary at $tessel (build first)" >&2
  exit 2
}
work=$(mktemp -d)
trap '[[ -n ${EMIT_BEST_KEEP:-} ]] || rm -rf "$work"' EXIT
[[ -z ${EMIT_BEST_KEEP:-} ]] || echo "studies and kernels in $work"

failed=0
skipped=()
printf '%-24s %-10s %-6s %s\n' example target result detail
for example in examples/*.tsl; do
  name=$(basename "$example" .tsl)
  # the simulator's spaces, as tests/nki/emit_test.cpp finds them: the space loads on trn2
  # and names a simulator workload (the cpu spaces read target fields trn2 lacks)
  if ! "$tessel" tune "$example" --backend sim --target trn2 --budget 1 --seed 1 --quiet \
    --no-gate --db "$work/$name.probe.db" >/dev/null 2>&1; then
    skipped+=("$name")
    continue
  fi
  for target in "${targets[@]}"; do
    db="$work/$name.$target.db" kernel="$work/$name.$target.py" err="$work/$name.$target.err"
    if ! "$tessel" tune "$example" --backend sim --target "$target" --budget "$budget" --seed 1 \
      --quiet --no-gate --db "$db" >/dev/null 2>"$err"; then
      result=FAIL detail="tune: $(grep -m1 . "$err" || true)"
    elif ! "$tessel" emit "$example" --best "$db" --target "$target" -o "$kernel" \
      >/dev/null 2>"$err"; then
      result=FAIL detail="emit: $(grep -m1 . "$err" || true)"
    elif ! "$python" tests/nki/check_emitted.py --count "$kernel" >"$err" 2>&1; then
      result=FAIL detail="count: $(grep -m1 'FAIL\|Error' "$err" || grep -m1 . "$err" || true)"
    else
      result=ok detail=$(sed -n 's/^ok .*(\(.*\))$/counted in \1/p' "$err")
    fi
    [[ $result == ok ]] || failed=$((failed + 1))
    printf '%-24s %-10s %-6s %s\n' "$name" "$target" "$result" "${detail:0:160}"
  done
done
((${#skipped[@]} == 0)) || echo "skipped (not a simulator space on trn2): ${skipped[*]}"
echo "$failed failed"
((failed == 0))
