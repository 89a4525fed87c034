#!/usr/bin/env bash
# Runs `terraform validate` on every example and module with the locally built provider:
# examples/<name>/ and modules/<name>/ as they are (local modules fetched with `terraform get`
# into a scratch data dir, so nothing is written to the checkout), and the registry-doc
# snippets examples/resources/<type>/ and examples/data-sources/<name>/ inside a scratch root
# module that declares the provider.
# Usage: scripts/tf-validate.sh <folder holding terraform-provider-hpc>
set -euo pipefail
provider_dir=${1:?usage: tf-validate.sh PROVIDER_DIR}
provider_dir=$(cd "$provider_dir" && pwd)
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

# validate DIR LABEL: `terraform get` then `terraform validate` in DIR.
validate() {
  local dir=$1 label=$2 out
  export TF_DATA_DIR="$work/data/${label//\//_}"
  if out=$(terraform -chdir="$dir" get -no-color 2>&1 && terraform -chdir="$dir" validate -no-color 2>&1); then
    echo "ok       $label"
  else
    echo "INVALID  $label"; echo "$out"; failed=1
  fi
  unset TF_DATA_DIR
}

for dir in "$root"/examples/*/ "$root"/modules/*/; do
  [ -n "$(ls "$dir"/*.tf 2>/dev/null)" ] || continue
  label=${dir#"$root"/}
  validate "$dir" "${label%/}"
done

for dir in "$root"/examples/resources/*/ "$root"/examples/data-sources/*/; do
  [ -n "$(ls "$dir"/*.tf 2>/dev/null)" ] || continue
  label=${dir#"$root"/}
  label=${label%/}
  snippet="$work/snippets/${label//\//_}"
  mkdir -p "$snippet"
  cp "$dir"/*.tf "$snippet"/
  cat > "$snippet/zz_provider.tf" <<'TF'
terraform {
  required_providers {
    hpc = { source = "hpcforge/hpc" }
  }
}
TF
  validate "$snippet" "$label"
done
exit $failed
