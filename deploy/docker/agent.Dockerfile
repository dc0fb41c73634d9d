# syntax=docker/dockerfile:1
# tandem-agent (roles router, prefill, decode, standalone): built with the scripts CI runs and
# NVIDIA's CUDA toolkit for Debian 12, shipped on a slim Debian 12 as a CUDA runtime base; runs
# as uid/gid 65532 (the uid the controller's pods ask for, controller/reconcile/pod_template.h).
#
#   docker build -f deploy/docker/agent.Dockerfile -t ghcr.io/tandem-dev/tandem-agent:0.1.0 .
#
# Why not an nvidia/cuda image: NVIDIA publishes none for Debian 12, and the Ubuntu 22.04 ones have
# an older glibc (2.35) than Debian 12 (2.36), which the binary is built against. The CUDA runtime
# is linked statically (CUDA::cudart_static, cmake/TandemCuda.cmake), so the runtime stage needs
# only the driver, which the NVIDIA container toolkit mounts into GPU pods; the NVIDIA_* variables
# below ask it to. Without a GPU the same image runs on CPU (deploy/examples/tiny-cpu.yaml).

ARG CUDA_VERSION=13-0

FROM debian:12 AS build
ARG CUDA_VERSION
WORKDIR /src
# nvcc and the CUDA headers and static runtime from NVIDIA's Debian 12 repository.
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates wget \
 && wget -q https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/cuda-keyring_1.1-1_all.deb \
 && dpkg -i cuda-keyring_1.1-1_all.deb && rm cuda-keyring_1.1-1_all.deb \
 && apt-get update \
 && apt-get install -y --no-install-recommends cuda-minimal-build-${CUDA_VERSION} \
 && rm -rf /var/lib/apt/lists/*
ENV PATH=/usr/local/cuda/bin:${PATH}
COPY . .
# The same dependency and build scripts as CI (scripts/test.sh); TANDEM_CUDA=ON fails the build if
# nvcc is not found instead of quietly building a CPU-only agent.
RUN bash scripts/install-deps.sh \
 && bash scripts/build.sh build -DTANDEM_CUDA=ON -DTANDEM_BUILD_TESTS=OFF -DTANDEM_BUILD_BENCHMARKS=OFF \
      -DCMAKE_BUILD_TYPE=Release \
 && install -m 0755 build/agent/tandem-agent /usr/local/bin/tandem-agent \
 && install -m 0755 build/tools/tandem /usr/local/bin/tandem

FROM debian:12-slim
# Runtime libraries of the binary (ldd build/agent/tandem-agent; apt brings gRPC's own: abseil,
# c-ares, re2, zlib) and CA certificates.
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates libgrpc++1.51 libprotobuf32 libyaml-cpp0.7 \
      libprometheus-cpp-core1.0 libssl3 \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /usr/local/bin/tandem-agent /usr/local/bin/tandem-agent
# The `tandem` command line too: the quality gate's eval Pod runs `tandem eval tools` (docs/eval.md).
COPY --from=build /usr/local/bin/tandem /usr/local/bin/tandem
ENV NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility
USER 65532:65532
EXPOSE 8000 50051 9400
ENTRYPOINT ["tandem-agent"]
