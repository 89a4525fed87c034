#!/usr/bin/env bash
# make test: the emulator's tests and the workspace's tests (unit + acceptance), then one
# closing line that counts them all: "summary: N passed, N failed".
#
# Two streams run side by side, after one build of every test:
# - booted: the Rust boot suite (booted clusters), HPCFORGE_BOOTED_AT_ONCE of its tests at a time
#   (default 2), each with its own emulator. Most of their time is spent waiting for machines,
#   not on the cores.
# - the rest: every other emulator and workspace test, then the emulator's own boot tests
#   (test_boot.py), which start when the rest's heavy part is done.
# The rest's output streams live; the booted stream's is printed whole when it ends, then each
# booted test's time and each stream's.
# Usage: scripts/run-tests.sh <folder holding terraform-provider-hpc>
set -uo pipefail
provider_dir=${1:?usage: run-tests.sh PROVIDER_DIR}
root=$(cd "$(dirname "$0")/.." && pwd)
emulator="$root/acceptance-tests/emulator"
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
export HPC_PROVIDER_DIR="$provider_dir" HPCFORGE_BIN_DIR="$provider_dir"
export HPCFORGE_BOOTED_AT_ONCE="${HPCFORGE_BOOTED_AT_ONCE:-2}" HPCFORGE_BOOTED_TIMES="$logs/booted-times"

# The acceptance tests other than the booted suite, as cargo --test arguments (no other package
# has an integration test of these names; acceptance-tests' own library has no unit tests).
rest_targets=()
for file in "$root"/acceptance-tests/tests/*.rs; do
  name=$(basename "$file" .rs)
  [ "$name" = boot ] || rest_targets+=(--test "$name")
done

# timed NAME COMMAND...: runs the command, then notes its wall time (and its exit status when it
# failed) for the closing lines, which are all a CI log may keep.
timed() {
  local name=$1 start=$SECONDS status=0 note=""
  shift
  "$@" || status=$?
  [ "$status" -eq 0 ] || note=", FAILED (exit $status)"
  echo "$name: $(( SECONDS - start )) s$note" >> "$logs/times"
  return $(( status != 0 ))
}

# Every cargo call here selects its targets with --workspace, never -p: cargo resolves features
# for the packages a call selects, and `-p acceptance-tests` alone resolves fewer, rebuilding tokio
# and the crates above it (minutes) instead of running what the build step built.
booted() {
  (cd "$root" && cargo test --workspace --no-fail-fast --test boot -- --test-threads "$HPCFORGE_BOOTED_AT_ONCE")
}

emulator_tests() {
  (cd "$emulator" && .venv/bin/python -m pytest -q -p no:cacheprovider "$@")
}

workspace_tests() {
  (cd "$root" && cargo test --workspace --exclude acceptance-tests --no-fail-fast --lib --bins --tests)
}

acceptance_tests() {
  (cd "$root" && cargo test --workspace --no-fail-fast "${rest_targets[@]}")
}

rest() {
  local status=0
  timed "emulator tests" emulator_tests --ignore=test_boot.py || status=1
  timed "workspace tests" workspace_tests || status=1
  timed "acceptance tests" acceptance_tests || status=1
  timed "emulator boot tests" emulator_tests test_boot.py || status=1
  return $status
}

# Free space where the tests write (the build, the image cache and the booted machines' disks):
# a full disk fails tests in ways that do not say so.
free_space() { df -h --output=avail "${TMPDIR:-/tmp}" /var/tmp 2>/dev/null | tail -n +2 | tr -s ' \n' ' '; }
echo "disk free at the start (tmp, var/tmp): $(free_space)" >> "$logs/times"
status=0
started=$SECONDS
(cd "$root" && cargo test --workspace --no-run) 2>&1 | tee "$logs/build"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
echo "test build: $(( SECONDS - started )) s" >> "$logs/times"
if [ "$status" -eq 0 ]; then
  echo "booted tests: $HPCFORGE_BOOTED_AT_ONCE at a time, beside the rest; their output follows when they end"
  timed "booted stream" booted >"$logs/booted" 2>&1 &
  booted_pid=$!
  timed "rest stream" rest 2>&1 | tee "$logs/rest"
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
  wait "$booted_pid" || status=1
  echo "---- booted tests ----"
  cat "$logs/booted"
fi
echo "disk free at the end (tmp, var/tmp): $(free_space)" >> "$logs/times"
echo "---- times ----"
cat "$logs/times" "$logs/booted-times" 2>/dev/null

# cargo: "test result: ok. 35 passed; 0 failed; ..."   pytest: "38 passed in 21.2s",
# "1 failed, 37 passed in ...", "37 passed, 1 error in ..." (an error: a fixture's setup or
# teardown failed, counted as a failure).
read -r passed failed < <(cat "$logs"/* | awk '
  /^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed;/) p += $i; if ($(i+1) ~ /^failed;/) f += $i } }
  /^[0-9]+ (passed|failed|errors?)[ ,]/ && / in [0-9.]+s/ {
    for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^(failed|errors?)/) f += $i }
  }
  END { print p + 0, f + 0 }')
if [ "$passed" -eq 0 ]; then status=1; fi
# Each failed test by name, with pytest's one-line reason, where the closing lines keep it.
# pytest: "FAILED test_boot.py::test_x - AssertionError: ..." (ERROR for a fixture's failure);
# cargo: "test name ... FAILED".
{
  grep -h -E '^(FAILED|ERROR) [^ ]+::' "$logs"/* | cut -c1-300
  grep -h -E '^test [^ ]+ \.\.\. FAILED$' "$logs"/* | sed -E 's/^test ([^ ]+) .*/FAILED \1/'
} | sort -u | sed 's/^/failed test: /'
echo "summary: $passed passed, $failed failed"
if [ "$status" -ne 0 ]; then
  echo "FAILED: $(grep -h 'FAILED' "$logs/times" | sed 's/:.*//' | paste -sd, - | sed 's/,/, /g')"
fi
exit $status
