#!/usr/bin/env bash
# Runs every go test -fuzz target for a while: `make fuzz` (FUZZTIME=2m each)
# and `make fuzz-short` (5s each, in CI). go test -fuzz takes one target of
# one package per run, so this lists the `func FuzzXxx` of each package's
# fuzz_test.go and runs them one after the other. A failure leaves the
# crashing input in that package's testdata/fuzz/FuzzXxx/, where plain
# `go test` replays it from then on.
#
#   scripts/fuzz.sh [FUZZTIME] [PACKAGE...]     e.g. scripts/fuzz.sh 30s ./hci
#
# FUZZPARALLEL sets the number of fuzzing workers (default: go's, GOMAXPROCS).
# FUZZMINIMIZETIME bounds the minimisation of each new input (default 5s, not
# go's 60s: with the slower targets, such as a whole WebRTC offer, 60s of
# minimising would take the whole of a short run).
set -euo pipefail
cd "$(dirname "$0")/.."

fuzztime=${1:-5s}
shift || true
GO=${GO:-go}
flags=(-fuzzminimizetime="${FUZZMINIMIZETIME:-5s}")
[ -n "${FUZZPARALLEL:-}" ] && flags+=(-parallel "$FUZZPARALLEL")

if [ $# -gt 0 ]; then
  files=()
  for p in "$@"; do files+=("${p%/}/fuzz_test.go"); done
else
  mapfile -t files < <(git ls-files '*fuzz_test.go'; git ls-files --others --exclude-standard '*fuzz_test.go')
fi

failed=()
n=0
for f in "${files[@]}"; do
  [ -f "$f" ] || { echo "fuzz: no $f" >&2; exit 2; }
  pkg=./$(dirname "${f#./}")
  # shellcheck disable=SC2013 # target names are single words
  for target in $(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$f"); do
    n=$((n + 1))
    echo "fuzz: $pkg $target for $fuzztime"
    if ! $GO test "$pkg" -run='^$' -fuzz="^${target}\$" -fuzztime="$fuzztime" "${flags[@]}"; then
      failed+=("$pkg $target")
    fi
  done
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: ${#failed[@]} of $n targets failed:" >&2
  printf '  %s\n' "${failed[@]}" >&2
  echo "fuzz: the inputs are in testdata/fuzz/ of those packages; go test replays them" >&2
  exit 1
fi
echo "fuzz: $n targets passed"
