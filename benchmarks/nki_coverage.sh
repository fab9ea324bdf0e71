#!/usr/bin/env bash
# benchmarks/nki_coverage.sh: the NKI coverage check (docs/nki.md, "Coverage")
# at benchmark scale, and the tuned best of every example at its full shape.
#
#   benchmarks/nki_coverage.sh BUILD_DIR [NUMERIC] [STRUCTURE] [BUDGET]
#
# 1. tests/nki's coverage test with NUMERIC (default 50) sampled configs per
#    example space run on the NKI interpreter against the reference on the
#    gate's seven input distributions, and STRUCTURE (default 200) more
#    counted (ctest runs 6 and 50; a space with fewer valid configs gives all
#    of them); every kernel's counts must equal the simulator's STRUCTURE.
# 2. benchmarks/emit_best.sh: for every example the simulator takes, at its
#    full shape, on trn2, trn2_lnc2 and trn2_chip: `tessel tune --budget
#    BUDGET` (default 40), `tessel emit --best`, and the kernel's counts
#    against its STRUCTURE (counted, not computed); a failure fails the run.
# Prints the interpreter's summary and the seconds each part took.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build=${1:?usage: benchmarks/nki_coverage.sh BUILD_DIR [NUMERIC] [STRUCTURE] [BUDGET]}
numeric=${2:-50}
structure=${3:-200}
budget=${4:-40}
python=/usr/bin/python3
[[ -x $python ]] || python=python3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

TIMEFORMAT='%R s wall, %U s CPU'
echo "coverage: $numeric run + $structure counted per example space"
echo -n "emit: "
time TESSEL_NKI_NUMERIC=$numeric TESSEL_NKI_STRUCTURE=$structure TESSEL_NKI_EMITTED="$work/emitted" \
  "$build/tests/nki/test_nki" -tc="emit_nki writes*" >"$work/emit.log"
echo -n "interpreter: "
time "$python" tests/nki/check_emitted.py "$work/emitted" >"$work/check.log" || {
  cat "$work/check.log"
  exit 1
}
cat "$work/check.log"

echo "full shapes: the tuned best ($budget evaluations) of every example on each target, emitted"
echo "and counted (benchmarks/emit_best.sh)"
echo -n "tune + emit + count: "
time benchmarks/emit_best.sh "$build" "$budget"
