# kvserve's container image: `kvserve` (serve, gateway and the tools) on
# Debian 12, with the bundled model, running as a non-root user.
#   scripts/image.sh [TAG]            # docker or podman; default kvserve:0.1.0
#   docker run -p 8000:8000 kvserve:0.1.0
# The image serves models/kvserve-tiny.gguf on port 8000; mount other
# models and configurations (deploy/kubernetes runs `kvserve serve --config`
# and `kvserve gateway --config` from ConfigMaps). The kernels are chosen at
# run time (AVX-512, AVX2 or portable code), so one image runs on any x86-64.
# Open MPI (openmpi-bin: mpirun and the libraries; an ssh client, and an sshd
# a worker pod runs as the kvserve user) runs a model across processes:
# `mpirun -np N kvserve serve --tensor-parallel N` (docs/parallel.md;
# deploy/kubernetes/parallel/replica-tp.yaml).
# Checked in CI without a container engine by tests/ops/image_test.sh: its
# paths, packages, build configuration, user, command and health check.

# --- build: a Release build of the kvserve binary only ---
FROM debian:12 AS build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      build-essential cmake ninja-build pkg-config \
      libboost-dev libboost-system-dev nlohmann-json3-dev libyaml-cpp-dev libcli11-dev \
      libspdlog-dev libfmt-dev libgtest-dev libgmock-dev libpcre2-dev libxxhash-dev libssl-dev libopenmpi-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY CMakeLists.txt ./
COPY cmake cmake
COPY src src
COPY tests tests
COPY tools tools
RUN cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DKVSERVE_BENCH=OFF \
 && cmake --build build --target kvserve

# --- runtime: the binary, its shared libraries, the bundled model ---
FROM debian:12-slim
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libssl3 libyaml-cpp0.7 libxxhash0 libspdlog1.10 libfmt9 libpcre2-8-0 curl ca-certificates \
      libopenmpi3 libhwloc15 libevent-core-2.1-7 libevent-pthreads-2.1-7 libudev1 zlib1g openmpi-bin openssh-client openssh-server \
 && rm -rf /var/lib/apt/lists/* \
 && mkdir -p /run/sshd \
 && useradd --system --uid 10001 --user-group --home-dir /var/lib/kvserve --create-home kvserve
COPY --from=build /src/build/src/cli/kvserve /usr/local/bin/kvserve
COPY models/kvserve-tiny.gguf /models/kvserve-tiny.gguf
COPY configs /etc/kvserve
USER kvserve
WORKDIR /var/lib/kvserve
EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=3s --start-period=60s \
  CMD curl -fsS http://127.0.0.1:8000/health || exit 1
ENTRYPOINT ["/usr/local/bin/kvserve"]
CMD ["serve", "--host", "0.0.0.0", "--port", "8000", "--model", "/models/kvserve-tiny.gguf", "--model.name", "kvserve-tiny"]
