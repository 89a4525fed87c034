#!/usr/bin/env bash
# Runs `terraform validate` on every example and module with the locally built provider.
# Usage: scripts/tf-validate.sh <folder holding terraform-provider-hpc>
set -euo pipefail
provider_dir=${1:?usage: tf-validate.sh PROVIDER_DIR}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat > "$work/cli.tfrc" <<CFG
provider_installation {
  dev_overrides { "hpcforge/hpc" = "$provider_dir" }
  direct {}
}
CFG
export TF_CLI_CONFIG_FILE="$work/cli.tfrc" CHECKPOINT_DISABLE=1 TF_IN_AUTOMATION=1
failed=0
for dir in "$root"/examples/*/ "$root"/modules/*/; do
  [ -n "$(ls "$dir"/*.tf 2>/dev/null)" ] || continue
  if out=$(terraform -chdir="$dir" validate -no-color 2>&1); then
    echo "ok       ${dir#"$root"/}"
  else
    echo "INVALID  ${dir#"$root"/}"; echo "$out"; failed=1
  fi
done
exit $failed
