#!/usr/bin/env bash
# make release: build terraform-provider-hpc for each platform (release profile) and package it
# with scripts/release.py into dist/release/<version>/ (the registry's files) and dist/mirror/.
#   PLATFORMS="linux_amd64 linux_arm64"   targets to build (default: both)
#   HPC_RELEASE_GPG_KEY=<key id>          signs the SHA256SUMS (an RSA key, as the registry requires)
#   UNSIGNED=1                            no signature: a mirror only
#   DIST=dist                             where to write
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
platforms=${PLATFORMS:-linux_amd64 linux_arm64}
dist=${DIST:-dist}
target_dir=${CARGO_TARGET_DIR:-$root/target}

if [ -n "${HPC_RELEASE_GPG_KEY:-}" ]; then
  signing=(--gpg-key "$HPC_RELEASE_GPG_KEY")
elif [ "${UNSIGNED:-}" = 1 ]; then
  signing=(--unsigned)
else
  echo "release: set HPC_RELEASE_GPG_KEY to the id of the signing key in your gpg keyring" >&2
  echo "         (gpg --list-secret-keys), or UNSIGNED=1 to package a mirror without a signature" >&2
  exit 2
fi

rust_target() {
  case "$1" in
    linux_amd64) echo x86_64-unknown-linux-gnu ;;
    linux_arm64) echo aarch64-unknown-linux-gnu ;;
    darwin_amd64) echo x86_64-apple-darwin ;;
    darwin_arm64) echo aarch64-apple-darwin ;;
    *) echo "release: PLATFORMS: unknown platform $1 (linux_amd64, linux_arm64, darwin_amd64, darwin_arm64)" >&2; return 1 ;;
  esac
}

# The version a built binary reports: natively, or for another Linux architecture under
# qemu-user (Debian's qemu-user) when it is installed; empty when it cannot be run here.
reported_version() {
  local platform=$1 binary=$2
  case "$platform" in
    linux_amd64) [ "$host" = x86_64-unknown-linux-gnu ] && "$binary" --version ;;
    linux_arm64)
      if [ "$host" = aarch64-unknown-linux-gnu ]; then "$binary" --version
      elif command -v qemu-aarch64 >/dev/null; then qemu-aarch64 -L /usr/aarch64-linux-gnu "$binary" --version
      fi ;;
  esac
}

host=$(rustc -vV | sed -n 's/^host: //p')
binaries=()
for platform in $platforms; do
  target=$(rust_target "$platform")
  if [ "$target" = "$host" ]; then
    cargo build --release --locked -p terraform-provider-hpc
    binaries+=(--binary "$platform=$target_dir/release/terraform-provider-hpc")
  else
    scripts/cross-build.sh "$target" --release --locked -p terraform-provider-hpc
    binaries+=(--binary "$platform=$target_dir/$target/release/terraform-provider-hpc")
  fi
done

# One version, three places: Cargo.toml (what the binary reports), the archive names, CHANGELOG.md.
version=$(cargo metadata --format-version 1 --no-deps \
  | python3 -c 'import json,sys; print(next(p["version"] for p in json.load(sys.stdin)["packages"] if p["name"] == "terraform-provider-hpc"))')
for spec in "${binaries[@]}"; do
  [ "$spec" = --binary ] && continue
  platform=${spec%%=*} binary=${spec#*=}
  reported=$(reported_version "$platform" "$binary" || true)
  if [ -z "$reported" ]; then
    echo "release: $platform: $binary cannot run on this host; its version is not checked" >&2
  elif [ "$reported" != "terraform-provider-hpc $version" ]; then
    echo "release: $binary ($platform) reports '$reported', not $version" >&2
    exit 1
  fi
done
if ! grep -q "^## \[$version\]" CHANGELOG.md; then
  echo "release: CHANGELOG.md has no '## [$version]' section: describe the release there first" >&2
  exit 1
fi
python3 scripts/release.py --version "$version" "${binaries[@]}" --out "$dist" "${signing[@]}"
