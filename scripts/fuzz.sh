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

log=$(mktemp)
trap 'rm -f "$log"' EXIT

# boundary_race tells whether a failed run's log ($1) is Go's own race at the
# end of -fuzztime and nothing else: Go 1.26's coordinator can report its
# deadline as the target's failure ("context deadline exceeded") when a
# worker is slow to stop, as on a loaded CI machine (golang/go#75804, fixed
# in Go 1.27). A real finding always says "Failing input written"; a panic,
# a t.Error or a hang says something else besides.
boundary_race() {
  grep -q '^    context deadline exceeded$' "$1" &&
    ! grep -qE 'Failing input written|panic:|_test\.go:[0-9]+:|fuzzing process hung|terminated unexpectedly' "$1"
}

# run_target fuzzes one target; a bare boundary race is retried once, and if
# it comes again the target's corpus is replayed without fuzzing (what a
# finding would have left behind is in it) and the race reported, not failed.
run_target() {
  local pkg=$1 target=$2 try
  for try in 1 2; do
    if $GO test "$pkg" -run='^$' -fuzz="^${target}\$" -fuzztime="$fuzztime" "${flags[@]}" 2>&1 | tee "$log"; then
      return 0
    fi
    boundary_race "$log" || return 1
    echo "fuzz: $pkg $target: Go's fuzztime deadline race (golang/go#75804), no input found; try $try of 2" >&2
  done
  $GO test "$pkg" -run="^${target}\$" -count=1 || return 1
  raced+=("$pkg $target")
}

failed=()
raced=()
n=0
for f in "${files[@]}"; do
  [ -f "$f" ] || { echo "fuzz: no $f" >&2; exit 2; }
  pkg=./$(dirname "${f#./}")
  # shellcheck disable=SC2013 # target names are single words
  for target in $(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$f"); do
    n=$((n + 1))
    echo "fuzz: $pkg $target for $fuzztime"
    run_target "$pkg" "$target" || failed+=("$pkg $target")
  done
done
if [ ${#raced[@]} -gt 0 ]; then
  echo "fuzz: ${#raced[@]} targets met Go's fuzztime deadline race twice (no input found, corpus replayed clean):" >&2
  printf '  %s\n' "${raced[@]}" >&2
fi
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: ${#failed[@]} of $n targets failed:" >&2
  printf '  %s\n' "${failed[@]}" >&2
  echo "fuzz: the inputs are in testdata/fuzz/ of those packages; go test replays them" >&2
  exit 1
fi
echo "fuzz: $n targets passed"
