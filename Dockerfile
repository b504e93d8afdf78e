# syntax=docker/dockerfile:1
# marspec service image: the gallery and REST API on :8080, models embedded in the binary,
# jobs and images in the /data volume. Build and run:
#
#   docker build -t marspec .
#   docker run -p 8080:8080 -v marspec-data:/data marspec
#
# The stages do what the Makefile does: `make setup` (scripts/setup_ort.sh fetches the ONNX
# Runtime library from the npm registry) and `make build` (go build ./cmd/marspec).

# 1. ONNX Runtime: the same script and version as `make setup` (it needs npm).
FROM node:22-bookworm-slim AS ort
WORKDIR /src
COPY scripts/setup_ort.sh scripts/setup_ort.sh
RUN bash scripts/setup_ort.sh && test -s third_party/onnxruntime/libonnxruntime.so

# 2. The binary, as `make build` makes it. cgo stays on: onnxruntime_go loads the library
# with dlopen. The models (models/) are embedded by go:embed, so they travel in the binary.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN make build GO="go" && ./bin/marspec -h >/dev/null

# 3. Runtime: Debian slim (glibc and libstdc++, which the library needs), a non-root user.
FROM debian:bookworm-slim
RUN useradd --system --uid 10001 --home-dir /data --shell /usr/sbin/nologin marspec \
 && mkdir -p /data && chown marspec:marspec /data
COPY --from=ort /src/third_party/onnxruntime/libonnxruntime.so /usr/local/lib/marspec/libonnxruntime.so
COPY --from=build /src/bin/marspec /usr/local/bin/marspec
ENV MARSPEC_ORT_LIB=/usr/local/lib/marspec/libonnxruntime.so
USER marspec
WORKDIR /data
VOLUME /data
EXPOSE 8080
# No curl in the slim image: bash's /dev/tcp asks /healthz and wants a 200.
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
  CMD ["bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/8080 && printf 'GET /healthz HTTP/1.0\\r\\nHost: localhost\\r\\n\\r\\n' >&3 && head -n 1 <&3 | grep -q ' 200 '"]
ENTRYPOINT ["marspec"]
CMD ["serve", "--addr", "0.0.0.0:8080", "--data-dir", "/data"]
