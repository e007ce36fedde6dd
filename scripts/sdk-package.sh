#!/usr/bin/env bash
# Packages wasmctrl-core and wasmctrl-sdk as crates.io would receive them and verifies them by
# building the packaged sources alone (`cargo package` does both).
#
# Cargo verifies the SDK against the scope crate through a temporary registry at
# $CARGO_TARGET_DIR/package/tmp-registry, and treats what comes from a registry as immutable:
#   - it unpacks the crate into $CARGO_HOME/registry/src/<hash of the registry's path>/ once, and
#     never again for the same version;
#   - it builds it once into $CARGO_TARGET_DIR/debug/deps and never rebuilds it for changed sources.
# Both survive between runs (a kept cargo home, a kept target directory), so a second run would
# verify the SDK against the scope crate of the first. Neither crate comes from crates.io, so
# whatever cargo keeps of them from a registry is this script's own, and it removes it first.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
cargo=${CARGO:-cargo}
target_dir=${CARGO_TARGET_DIR:-$root/target}
cargo_home=${CARGO_HOME:-$HOME/.cargo}

rm -rf "$cargo_home"/registry/src/*/wasmctrl-core-* "$cargo_home"/registry/src/*/wasmctrl-sdk-*

# A build of the registry copy is told apart from the workspace's by its dep-info, which names
# the unpacked sources.
shopt -s nullglob
for depinfo in "$target_dir"/debug/deps/wasmctrl_core-*.d; do
    if grep -q "$cargo_home/registry/src/" "$depinfo"; then
        hash=${depinfo##*/wasmctrl_core-}
        hash=${hash%.d}
        rm -rf "$target_dir"/debug/deps/*wasmctrl_core-"$hash".* "$target_dir"/debug/.fingerprint/wasmctrl-core-"$hash"
    fi
done

"$cargo" package -p wasmctrl-core -p wasmctrl-sdk --allow-dirty
