#!/usr/bin/env bash
# Installs what `make dev` and `make test` need beyond the rustup toolchain the machine ships with.
# Idempotent and quick when everything is present: it only looks at files until something is
# missing, and only then runs `apt-get update` and one `apt-get install`.
#
#   - a wasm32 toolchain: the rustup `wasm32-unknown-unknown` target if installed, otherwise
#     Debian's rustc-web + cargo-web + rust-web-src + lld (`wasmctrl build` uses either; see
#     host/src/build/toolchain.rs for how it picks); likewise `wasm32-wasip1` (test plugins
#     built for WASI), whose Debian fallback also links Debian's wasi-libc
#   - PostgreSQL (server and initdb) for the postgres-writer plugin's end-to-end tests
#   - kubectl, only when none is on PATH (Debian's kubernetes-client is older but enough)
#   - python3-prometheus-client, the exposition parser the metrics tests use
#   - umoci, skopeo, binutils and ca-certificates, which `make image` (scripts/image.sh) builds
#     the OCI image with and the image test unpacks it with
#   - Node.js and npm, for the TypeScript SDK and plugins (scripts/install-plugin-tools.sh then
#     installs the Python and npm packages themselves)
#   - cargo-nextest, which `make test` runs the tests with (built from crates.io if missing)
set -euo pipefail

log() { echo "install-deps: $*"; }

# Debian package name -> why it is wanted, for the one line printed per installed package.
declare -A why=()
packages=()
want() {
    [ -n "${why[$1]:-}" ] && return 0   # already wanted
    if [ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" != "install ok installed" ]; then
        packages+=("$1")
        why[$1]=$2
    fi
}

have_dpkg=true
command -v dpkg-query >/dev/null 2>&1 || have_dpkg=false
missing_elsewhere=()

# 1. wasm32 toolchain. Same test as `wasmctrl build`: the std of the rustc that applies here.
sysroot=$(rustc --print sysroot 2>/dev/null || true)
#    wasm32-wasip1 is what WASI test plugins (tests/plugins/wasi-probe) are built for; its Debian
#    fallback also links Debian's wasi-libc.
for target in wasm32-unknown-unknown wasm32-wasip1; do
    [ -n "$sysroot" ] && [ -d "$sysroot/lib/rustlib/$target/lib" ] && continue
    if $have_dpkg; then
        want rustc-web "Debian rustc, to build plugins for wasm32 with std from source"
        want cargo-web "Debian cargo matching rustc-web"
        want rust-web-src "std sources for -Zbuild-std"
        want lld "wasm-ld, the wasm32 linker"
        if [ "$target" = wasm32-wasip1 ]; then
            want wasi-libc "the C library std links for wasm32-wasip1 (tests/plugins/wasi-probe)"
        fi
    else
        missing_elsewhere+=("a $target toolchain: run \`rustup target add $target\`")
    fi
done

# 2. PostgreSQL server with initdb (tests run a private cluster).
if ! compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null; then
    if $have_dpkg; then
        want postgresql "PostgreSQL server and initdb, for the postgres-writer tests"
    else
        missing_elsewhere+=("PostgreSQL (server and initdb)")
    fi
fi

# 3. kubectl, only if the machine image has none.
if ! command -v kubectl >/dev/null 2>&1; then
    if $have_dpkg; then
        want kubernetes-client "kubectl (Debian's older build; the machine image has none)"
    else
        missing_elsewhere+=("kubectl")
    fi
fi

# 4. A real Prometheus exposition parser for the metrics tests (Debian's python3, not whichever
#    python3 is first on PATH).
if ! /usr/bin/python3 -c 'import prometheus_client.parser' >/dev/null 2>&1; then
    if $have_dpkg; then
        want python3-prometheus-client "the Prometheus text parser the metrics tests check /metrics with"
    else
        missing_elsewhere+=("python3 with prometheus_client (the metrics tests parse /metrics with it)")
    fi
fi

# 5. The image tools (`make image`, host/tests/it/image.rs): umoci and skopeo assemble and unpack
#    the OCI image without a registry or a container engine; binutils strips the binary;
#    ca-certificates is the bundle the image carries.
if ! command -v umoci >/dev/null 2>&1 || ! command -v skopeo >/dev/null 2>&1 ||
    ! command -v objcopy >/dev/null 2>&1 || [ ! -f /etc/ssl/certs/ca-certificates.crt ]; then
    if $have_dpkg; then
        want umoci "builds the OCI image (make image) and unpacks it in the image test"
        want skopeo "writes and reads the image's OCI archive"
        want binutils "objcopy, to strip the image's copy of the binary"
        want ca-certificates "the CA bundle the image carries"
    else
        missing_elsewhere+=("umoci, skopeo, objcopy (binutils) and /etc/ssl/certs/ca-certificates.crt, for make image")
    fi
fi

# 6. An OCI registry for the registry tests (host/tests/it/oci.rs): Debian's build of the CNCF
#    distribution registry, which the tests start on loopback with a config of their own.
if ! command -v docker-registry >/dev/null 2>&1; then
    if $have_dpkg; then
        want docker-registry "the CNCF distribution registry the OCI tests push plugins to"
    else
        missing_elsewhere+=("docker-registry (the CNCF distribution registry), for the OCI tests")
    fi
fi

# 7. Node.js and npm, which build and test the TypeScript SDK and plugins (componentize-js runs on
#    Node); machine images usually carry them.
if ! command -v npm >/dev/null 2>&1; then
    if $have_dpkg; then
        want nodejs "Node.js, to build and test the TypeScript plugins"
        want npm "npm, to install the TypeScript SDK's build tools"
    else
        missing_elsewhere+=("Node.js and npm, for the TypeScript plugins")
    fi
fi

# 8. cargo-nextest: `make test` runs every test in a process of its own with it (see
#    host/tests/it/main.rs). Machine images usually carry it; otherwise it is built once.
if ! cargo nextest --version >/dev/null 2>&1; then
    log "building cargo-nextest from crates.io (make test runs the tests with it)"
    cargo install --locked --quiet cargo-nextest
fi

if [ ${#missing_elsewhere[@]} -gt 0 ]; then
    for thing in "${missing_elsewhere[@]}"; do log "missing (not a Debian system, install it yourself): $thing"; done
    exit 1
fi

if [ ${#packages[@]} -eq 0 ]; then
    log "everything present"
    exit 0
fi

sudo=()
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || { log "need root or sudo to install: ${packages[*]}"; exit 1; }
    sudo=(sudo)
fi

# Quiet apt: its output would bury the one line per package below; errors still show.
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${packages[@]}" >/dev/null
for pkg in "${packages[@]}"; do log "installed $pkg (${why[$pkg]})"; done
