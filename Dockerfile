# syntax=docker/dockerfile:1
# The wasmctrl host image, for those with a registry and a Docker/BuildKit engine:
#
#   docker build --build-arg VERSION=$(cargo pkgid -p wasmctrl | sed 's/.*@//') -t <registry>/wasmctrl .
#
# Not built on the project's machines: they reach no registry and run no engine. There
# `make image` (scripts/image.sh) builds an equivalent image from local artifacts only, as
# target/image/wasmctrl.tar. Plugins are not in the image: mount them at /plugins.

# Bookworm, like the final stage's Debian 12: the binary needs no newer glibc than it has.
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
# Only the host binary, without the embedded API server (`dev`, `apiserver`: not for clusters).
# The release profile keeps line tables; drop them, keep the symbols
# (panic backtraces). The target directory is a cache mount, so copy the binary out of it.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --no-default-features -p wasmctrl --bin wasmctrl \
    && objcopy --strip-debug target/release/wasmctrl /wasmctrl \
    && mkdir /plugins

# glibc, libgcc, CA certificates and the nonroot user 65532; no shell.
FROM gcr.io/distroless/cc-debian12:nonroot
ARG VERSION=unknown
LABEL org.opencontainers.image.title=wasmctrl \
      org.opencontainers.image.source=https://example.invalid/wasmctrl \
      org.opencontainers.image.version=$VERSION
COPY --from=build /wasmctrl /usr/local/bin/wasmctrl
COPY --from=build /plugins /plugins
USER 65532:65532
# Metrics over HTTPS and health probes (--metrics-bind-address, --health-probe-bind-address).
EXPOSE 8443 8081
ENTRYPOINT ["wasmctrl", "run", "--plugins", "/plugins"]
