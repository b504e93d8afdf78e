# syntax=docker/dockerfile:1
# marspec service image: the gallery and REST API on :8080, models embedded in the binary,
# jobs and images in the /data volume. Build and run:
#
#   make image                       (docker or podman, whichever is there; tag marspec:VERSION)
#   docker run -p 8080:8080 -v marspec-data:/data marspec:latest
#
# The stages do what the Makefile does: `make setup` (scripts/ops/setup_ort.sh fetches the ONNX
# Runtime library from the npm registry) and `make build` (go build ./cmd/marspec).
#
# The base images are build arguments with the public images as defaults, so the same file
# builds where only local bases exist (scripts/ops/image.sh makes them with mmdebstrap when
# the public ones cannot be pulled). A build step that fetches trusts the image's CA bundle,
# or /run/host-ca.crt when the builder mounts one there (behind a TLS-inspecting proxy:
# `podman build -v /etc/ssl/certs/ca-certificates.crt:/run/host-ca.crt:ro`).
ARG NODE_IMAGE=node:22-bookworm-slim
ARG GO_IMAGE=golang:1.26-bookworm
ARG RUNTIME_IMAGE=debian:bookworm-slim
# ORT=gpu: ONNX Runtime's CUDA build instead (docs/gpu.md), for a CUDA 13 + cuDNN 9 runtime base:
#   docker build --build-arg ORT=gpu --build-arg RUNTIME_IMAGE=nvidia/cuda:13.0.1-cudnn-runtime-ubuntu24.04 -t marspec:TAG-cuda .
ARG ORT=cpu

# 1. ONNX Runtime: the same script and version as `make setup` (it needs npm).
FROM ${NODE_IMAGE} AS ort
ARG ORT
WORKDIR /src
COPY scripts/ops/setup_ort.sh scripts/ops/setup_ort.sh
RUN if [ -s /run/host-ca.crt ]; then export npm_config_cafile=/run/host-ca.crt; fi \
 && mkdir -p /ort \
 && if [ "$ORT" = gpu ]; then bash scripts/ops/setup_ort.sh --gpu && cp third_party/onnxruntime-gpu/*.so /ort/; \
    else bash scripts/ops/setup_ort.sh && cp third_party/onnxruntime/libonnxruntime.so /ort/; fi \
 && test -s /ort/libonnxruntime.so

# 2. The binary, as `make build` makes it. cgo stays on: onnxruntime_go loads the library
# with dlopen. The models (models/) are embedded by go:embed, so they travel in the binary.
FROM ${GO_IMAGE} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN if [ -s /run/host-ca.crt ]; then export SSL_CERT_FILE=/run/host-ca.crt; fi && go mod download
COPY . .
RUN make build GO="go" && ./bin/marspec -h >/dev/null

# 3. Runtime: Debian slim (glibc and libstdc++, which the library needs), a non-root user. The
# root file system can run read-only (`--read-only`): only /data is written.
FROM ${RUNTIME_IMAGE}
RUN useradd --system --uid 10001 --home-dir /data --shell /usr/sbin/nologin marspec \
 && mkdir -p /data && chown marspec:marspec /data
# the CUDA provider's libraries, where ORT=gpu, sit beside the core: ONNX Runtime loads them from its folder
COPY --from=ort /ort/ /usr/local/lib/marspec/
COPY --from=build /src/bin/marspec /usr/local/bin/marspec
ENV MARSPEC_ORT_LIB=/usr/local/lib/marspec/libonnxruntime.so \
    MARSPEC_ADDR=0.0.0.0:8080 \
    MARSPEC_DATA_DIR=/data
USER marspec
WORKDIR /data
VOLUME /data
EXPOSE 8080
# No curl in the slim image: bash's /dev/tcp asks /healthz on the port of MARSPEC_ADDR (so a
# container started with another address stays checked) and wants a 200.
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
  CMD ["bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/${MARSPEC_ADDR##*:} && printf 'GET /healthz HTTP/1.0\\r\\nHost: localhost\\r\\n\\r\\n' >&3 && head -n 1 <&3 | grep -q ' 200 '"]
ENTRYPOINT ["marspec"]
CMD ["serve"]
