#!/usr/bin/env bash
# Builds with cargo for a Rust target other than the host's: checks that the target's standard
# library and linker are installed (naming what to install when not), and links a Linux target
# with Debian's cross gcc unless the caller chose a linker (CARGO_TARGET_<TRIPLE>_LINKER).
# Usage: scripts/cross-build.sh <rust target> <cargo build arguments...>
set -euo pipefail
target=${1:?usage: cross-build.sh TARGET [cargo build arguments]}
shift

if ! rustup target list --installed 2>/dev/null | grep -qx "$target"; then
  echo "cross-build: the Rust target $target is not installed: rustup target add $target" >&2
  exit 2
fi
case "$target" in
  aarch64-unknown-linux-gnu) gcc=aarch64-linux-gnu-gcc package=gcc-aarch64-linux-gnu ;;
  *) gcc= ;;
esac
linker_var=CARGO_TARGET_$(echo "$target" | tr 'a-z-' 'A-Z_')_LINKER
if [ -n "$gcc" ] && [ -z "${!linker_var:-}" ]; then
  if ! command -v "$gcc" >/dev/null; then
    echo "cross-build: $target links with $gcc: apt-get install $package (or set $linker_var)" >&2
    exit 2
  fi
  # The linker, and the C compiler for crates that build C (ring).
  export "$linker_var=$gcc" "CC_${target//-/_}=$gcc"
fi
exec "${CARGO:-cargo}" build --target "$target" "$@"
