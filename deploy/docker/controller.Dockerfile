# syntax=docker/dockerfile:1
# tandem-controller: built with the scripts CI runs, shipped on a slim Debian 12 with only the
# shared libraries it links (OpenSSL, yaml-cpp, prometheus-cpp core). No CUDA, no engine, no shell
# tools beyond Debian's base; runs as uid/gid 65532.
#
#   docker build -f deploy/docker/controller.Dockerfile -t ghcr.io/tandem-dev/tandem-controller:0.1.0 .
#
# The build context is the repository root; controller.Dockerfile.dockerignore keeps build trees,
# .venv/ and models out of it.

FROM debian:12 AS build
WORKDIR /src
COPY . .
# The same dependency and build scripts as CI (scripts/test.sh). TANDEM_CONTROLLER_ONLY builds
# common/ and controller/ only.
RUN bash scripts/install-deps.sh \
 && bash scripts/build.sh build -DTANDEM_CONTROLLER_ONLY=ON -DTANDEM_CUDA=OFF -DTANDEM_BUILD_TESTS=OFF \
      -DTANDEM_BUILD_BENCHMARKS=OFF -DCMAKE_BUILD_TYPE=Release \
 && install -m 0755 build/controller/tandem-controller /usr/local/bin/tandem-controller

FROM debian:12-slim
# Runtime libraries of the binary (ldd build/controller/tandem-controller) and CA certificates.
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates libssl3 libyaml-cpp0.7 libprometheus-cpp-core1.0 \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /usr/local/bin/tandem-controller /usr/local/bin/tandem-controller
# Numeric, so that Kubernetes can check runAsNonRoot without a passwd entry.
USER 65532:65532
EXPOSE 8080 8081
ENTRYPOINT ["tandem-controller"]
