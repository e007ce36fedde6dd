#!/usr/bin/env bash
# Builds the host's OCI image from local artifacts only: no registry, no container engine, no
# root. One layer holding
#
#   /usr/local/bin/wasmctrl         the release binary, debug info stripped (symbols kept for
#                                   panic backtraces)
#   the libraries it links          exactly what `ldd` lists, plus the dynamic loader, at their paths
#   /etc/ssl/certs/ca-certificates.crt   Debian's CA bundle (rustls-native-certs reads it)
#   /etc/passwd, /etc/group         root 0 and nonroot 65532, as in distroless
#   /plugins, /tmp (1777)           empty: plugins are mounted at run time
#
# is written as a tar owned by root (so no root is needed to build it), added to an OCI layout
# with umoci, given its config (user 65532, the entrypoint, ports, labels) and written as an OCI
# archive with skopeo to $CARGO_TARGET_DIR/image/wasmctrl.tar (default target/image/). Load it
# with `podman load -i` or push it with `skopeo copy oci-archive:... docker://...`. The
# Dockerfile at the repository root builds the same image where a registry and an engine exist.
# The same binary gives the same image digest: times come from SOURCE_DATE_EPOCH, else the last
# commit (only the archive's own tar headers carry the time it was written).
set -euo pipefail
umask 022

log() { echo "image: $*"; }
die() {
    echo "image: $*" >&2
    exit 1
}

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
target_dir=${CARGO_TARGET_DIR:-$root/target}
case $target_dir in /*) ;; *) target_dir=$root/$target_dir ;; esac
cargo=${CARGO:-cargo}
certs=/etc/ssl/certs/ca-certificates.crt

for tool in umoci skopeo objcopy ldd tar; do
    command -v "$tool" >/dev/null 2>&1 || die "$tool is missing: run \`make deps\` (scripts/install-deps.sh)"
done
[ -f "$certs" ] || die "$certs is missing: run \`make deps\` (it installs ca-certificates)"

# PROFILE=dev packs the debug build instead (same script, same layout): what `make test` does,
# since a release build of the host would add about ten minutes to CI for the same test.
case ${PROFILE:-release} in
# A release image serves clusters: it does not link the embedded API server (`dev`, `apiserver`).
release) $cargo build --release --no-default-features -p wasmctrl --bin wasmctrl && binary=$target_dir/release/wasmctrl ;;
# HOST_BUILD: how the debug binary is built (`make test` builds it within the test build, so
# that no crate is compiled twice for a different feature set).
dev) $cargo ${HOST_BUILD:-build -p wasmctrl --bin wasmctrl} && binary=$target_dir/debug/wasmctrl ;;
*) die "PROFILE must be release or dev, not ${PROFILE}" ;;
esac
[ -x "$binary" ] || die "cargo built no $binary"

pkgid=$($cargo pkgid -p wasmctrl)
version=${pkgid##*[#@]}
source=$(sed -n 's/^repository = "\(.*\)"$/\1/p' Cargo.toml)
[ -n "$source" ] || die "no \`repository = \"...\"\` in Cargo.toml's [workspace.package]"
epoch=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}
created=$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)

# Start from nothing each time, so that a file removed from the list leaves the image too.
work=$target_dir/image/build
out=$target_dir/image/wasmctrl.tar
rm -rf "$work"
rootfs=$work/rootfs
mkdir -p "$rootfs"

# The binary, then every library it links at the path the loader finds it (ldd prints
# `name => /path (addr)` for libraries, `/path (addr)` for the loader, no path for the vDSO).
mkdir -p "$rootfs/usr/local/bin"
objcopy --strip-debug "$binary" "$rootfs/usr/local/bin/wasmctrl"
chmod 0755 "$rootfs/usr/local/bin/wasmctrl"
links=$(ldd "$binary") || die "ldd $binary failed"
if grep -q 'not found' <<<"$links"; then
    die "$binary links libraries this machine lacks:"$'\n'"$links"
fi
while read -r lib; do
    install -D -m 0755 "$(readlink -f "$lib")" "$rootfs$lib"
done < <(awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^\//) print $i }' <<<"$links")

install -D -m 0644 "$(readlink -f "$certs")" "$rootfs$certs"
printf '%s\n' 'root:x:0:0:root:/root:/sbin/nologin' \
    'nonroot:x:65532:65532:nonroot:/nonexistent:/sbin/nologin' >"$rootfs/etc/passwd"
printf '%s\n' 'root:x:0:' 'nonroot:x:65532:' >"$rootfs/etc/group"
chmod 0644 "$rootfs/etc/passwd" "$rootfs/etc/group"
mkdir -m 0755 "$rootfs/plugins"
mkdir -m 1777 "$rootfs/tmp"

# Owned by root whoever builds it; sorted, with fixed times and no atime/ctime, so the same
# inputs give the same layer.
(cd "$rootfs" && find . -mindepth 1 -maxdepth 1 -printf '%P\n') | sort >"$work/top"
tar --create --file "$work/layer.tar" --directory "$rootfs" --files-from "$work/top" \
    --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$epoch" \
    --format=posix --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime

layout=$work/oci
image=$layout:$version
umoci init --layout "$layout"
umoci new --image "$image"
umoci raw add-layer --image "$image" --history.created "$created" \
    --history.created_by "scripts/image.sh: the wasmctrl binary and what it needs" "$work/layer.tar"
umoci config --image "$image" --created "$created" --history.created "$created" \
    --history.created_by "scripts/image.sh: user, entrypoint, ports, labels" \
    --config.user 65532:65532 \
    --config.entrypoint /usr/local/bin/wasmctrl --config.entrypoint run \
    --config.entrypoint --plugins --config.entrypoint /plugins \
    --config.env PATH=/usr/local/bin:/usr/bin:/bin \
    --config.workingdir / \
    --config.exposedports 8443/tcp --config.exposedports 8081/tcp \
    --config.label org.opencontainers.image.title=wasmctrl \
    --config.label "org.opencontainers.image.source=$source" \
    --config.label "org.opencontainers.image.version=$version"

# Written beside the old archive and renamed over it: an interrupted run leaves no half archive.
rm -f "$out.partial"
skopeo copy --quiet "oci:$image" "oci-archive:$out.partial:wasmctrl:$version"
mv -f "$out.partial" "$out"
rm -rf "$work"

size=$(stat -c %s "$out")
log "wrote ${out#"$root"/} (wasmctrl:$version, $(awk -v b="$size" 'BEGIN { printf "%.1f MB", b / 1e6 }'))"
