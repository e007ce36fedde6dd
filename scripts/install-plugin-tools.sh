#!/usr/bin/env bash
# Installs what builds and tests plugins written in Python and TypeScript, once:
#
#   - <tools dir>/python: a virtual environment with componentize-py (CPython for wasm: `wasmctrl
#     build` turns a Python project into a component with it) and pytest (the Python SDK's and
#     the Python plugins' native tests)
#   - each npm project given after the tools directory (the TypeScript SDK first, then the
#     plugins that depend on it): `npm ci`, from its package-lock.json (componentize-js, esbuild,
#     TypeScript)
#   - npm's cache: what a project `wasmctrl new --lang typescript` writes installs, so that its
#     test (host/tests/it/new.rs) installs it with `npm install --offline`
#
# Pinned versions; stamp files record what is installed, so a second run only reads them.
set -euo pipefail

tools=${1:?usage: install-plugin-tools.sh <tools dir> [npm project dir ...]}
shift
log() { echo "install-plugin-tools: $*"; }

python_packages="componentize-py==0.25.1 pytest==9.2.0"
venv=$tools/python
if [ "$(cat "$venv/.installed" 2>/dev/null)" != "$python_packages" ]; then
    log "installing $python_packages into $venv"
    python3 -m venv "$venv"
    # shellcheck disable=SC2086 # one word per package
    "$venv/bin/pip" install --quiet --disable-pip-version-check $python_packages
    echo "$python_packages" >"$venv/.installed"
fi

if [ $# -gt 0 ] && ! command -v npm >/dev/null 2>&1; then
    log "missing: Node.js 20 and npm, to build and test the TypeScript plugins ($*)"
    exit 1
fi
for project in "$@"; do
    lock=$(sha256sum "$project/package-lock.json" | cut -d' ' -f1)
    stamp=$project/node_modules/.wasmctrl-installed
    if [ "$(cat "$stamp" 2>/dev/null)" != "$lock" ]; then
        log "npm ci in $project"
        (cd "$project" && npm ci --no-audit --no-fund --loglevel=error)
        echo "$lock" >"$stamp"
    fi
done

# `npm ci` fetches the tarballs its lockfile names and nothing else, but `npm install` of a new
# project (no lockfile) resolves even pinned versions from the registry's package documents,
# dependencies' included. Install the scaffold's package.json once with the network, when
# installing it offline fails, so that npm's cache holds all of it.
if [ $# -gt 0 ]; then
    root=$(cd "$(dirname "$0")/.." && pwd)
    scaffold=$(mktemp -d)
    trap 'rm -rf "$scaffold"' EXIT
    sed -e "s#__NAME__#scaffold#; s#__KIND__#Scaffold#; s#__SDK__#file:$root/sdk/typescript#" \
        "$root/host/src/cli/new/typescript/package.json.tmpl" >"$scaffold/package.json"
    npm_install() { (cd "$scaffold" && npm install --ignore-scripts --no-audit --no-fund "$@"); }
    if ! npm_install --offline --loglevel=silent >/dev/null 2>&1; then
        log "caching the npm packages of wasmctrl new's TypeScript projects"
        rm -rf "$scaffold/node_modules" "$scaffold/package-lock.json"
        npm_install --loglevel=error
    fi
fi
