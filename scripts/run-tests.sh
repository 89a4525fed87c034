#!/usr/bin/env bash
# make test: the emulator's tests and the workspace's tests (unit + acceptance), then one
# closing line that counts them all: "summary: N passed, N failed".
# Usage: scripts/run-tests.sh <folder holding terraform-provider-hpc>
set -uo pipefail
provider_dir=${1:?usage: run-tests.sh PROVIDER_DIR}
root=$(cd "$(dirname "$0")/.." && pwd)
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0

(cd "$root/acceptance-tests/emulator" && HPCFORGE_BIN_DIR="$provider_dir" .venv/bin/python -m pytest -q -p no:cacheprovider) 2>&1 | tee -a "$log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

(cd "$root" && HPC_PROVIDER_DIR="$provider_dir" cargo test --workspace --no-fail-fast --lib --bins --tests 2>&1) | tee -a "$log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

# cargo: "test result: ok. 35 passed; 0 failed; ..."   pytest: "38 passed in 21.2s" / "1 failed, 37 passed in ..."
read -r passed failed < <(awk '
  /^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed;/) p += $i; if ($(i+1) ~ /^failed;/) f += $i } }
  /^[0-9]+ (passed|failed)/ || /^[0-9]+ failed, [0-9]+ passed/ {
    for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i }
  }
  END { print p + 0, f + 0 }' "$log")
if [ "$passed" -eq 0 ]; then status=1; fi
echo "summary: $passed passed, $failed failed"
exit $status
