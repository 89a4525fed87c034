#!/usr/bin/env bash
# make test: the emulator's tests and the workspace's tests (unit + acceptance), then one
# closing line that counts them all: "summary: N passed, N failed".
#
# Two streams run side by side, after one build of every test:
# - booted: the tests that boot machines (the emulator's test_boot.py, then the Rust boot
#   suite). Their emulators route VPC networks from the host, so only one runs at a time, and
#   most of their time is spent waiting for machines, not on the cores.
# - the rest: every other emulator and workspace test.
# The rest's output streams live; the booted stream's is printed whole when it ends.
# Usage: scripts/run-tests.sh <folder holding terraform-provider-hpc>
set -uo pipefail
provider_dir=${1:?usage: run-tests.sh PROVIDER_DIR}
root=$(cd "$(dirname "$0")/.." && pwd)
emulator="$root/acceptance-tests/emulator"
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
export HPC_PROVIDER_DIR="$provider_dir" HPCFORGE_BIN_DIR="$provider_dir"

# The acceptance tests other than the booted suite, as cargo --test arguments.
rest_targets=()
for file in "$root"/acceptance-tests/tests/*.rs; do
  name=$(basename "$file" .rs)
  [ "$name" = boot ] || rest_targets+=(--test "$name")
done

booted() {
  local status=0
  (cd "$emulator" && .venv/bin/python -m pytest -q -p no:cacheprovider test_boot.py) || status=1
  (cd "$root" && cargo test -p acceptance-tests --no-fail-fast --test boot) || status=1
  return $status
}

rest() {
  local status=0
  (cd "$emulator" && .venv/bin/python -m pytest -q -p no:cacheprovider --ignore=test_boot.py) || status=1
  (cd "$root" && cargo test --workspace --exclude acceptance-tests --no-fail-fast --lib --bins --tests) || status=1
  (cd "$root" && cargo test -p acceptance-tests --no-fail-fast --lib "${rest_targets[@]}") || status=1
  return $status
}

status=0
(cd "$root" && cargo test --workspace --no-run) 2>&1 | tee "$logs/build"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
if [ "$status" -eq 0 ]; then
  echo "booted tests: running beside the rest; their output follows when they end"
  booted >"$logs/booted" 2>&1 &
  booted_pid=$!
  rest 2>&1 | tee "$logs/rest"
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
  wait "$booted_pid" || status=1
  echo "---- booted tests ----"
  cat "$logs/booted"
fi

# cargo: "test result: ok. 35 passed; 0 failed; ..."   pytest: "38 passed in 21.2s" / "1 failed, 37 passed in ..."
read -r passed failed < <(cat "$logs"/* | awk '
  /^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed;/) p += $i; if ($(i+1) ~ /^failed;/) f += $i } }
  /^[0-9]+ (passed|failed)/ || /^[0-9]+ failed, [0-9]+ passed/ {
    for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i }
  }
  END { print p + 0, f + 0 }')
if [ "$passed" -eq 0 ]; then status=1; fi
echo "summary: $passed passed, $failed failed"
exit $status
