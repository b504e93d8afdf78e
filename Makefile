# marspec — see README.md. `make run` and `make test` work on a fresh machine.
GO ?= go
ORT_LIB := third_party/onnxruntime/libonnxruntime.so
PY := /usr/bin/python3

.PHONY: setup build run demo test image image-check cluster cluster-stop distill bench train export fixtures gpu-setup gpu-parts gpu-bench gpu-bench-tiny official-packs

$(ORT_LIB):
	bash scripts/ops/setup_ort.sh

setup: $(ORT_LIB)

build:
	$(GO) build -o bin/marspec ./cmd/marspec

# Serve the embedded models: REST API and gallery at http://127.0.0.1:8080 (data in ./data).
run: setup build
	./bin/marspec serve --addr 127.0.0.1:8080 --data-dir data

# Two replicas (8081, 8082) on a throwaway PostgreSQL and a versitygw S3 server; docs/scaling.md.
cluster: setup build
	bash scripts/ops/cluster.sh start

cluster-stop:
	bash scripts/ops/cluster.sh stop

# A grid of all 10 classes with the default settings, no server.
demo: setup build
	./bin/marspec generate --class all --n 4 --seed 1 --out out/demo --overwrite
	@echo "grid: out/demo-grid.png"

# The Python tools' tests (scripts/tests) take 4 to 5 minutes alone and can pass Go's default
# 10-minute limit on a busy machine.
test: setup
	$(GO) vet ./...
	$(GO) test -count=1 -timeout 30m ./...

bench: setup build
	./bin/marspec bench

# By hand, not in CI: train both default models (CPU, ~45 min, in the background with logs),
# then export packs and parity fixtures. See docs/models.md.
train:
	mkdir -p runs
	nohup $(PY) scripts/train/train.py --preset target --minutes 45 --threads 1 --out runs/target > runs/target.out 2>&1 &
	nohup $(PY) scripts/train/train.py --preset draft --minutes 30 --threads 1 --seed 1 --out runs/draft > runs/draft.out 2>&1 &

# By hand: a draft distilled from the target's samples (30,000 images at 4 AR steps and 25 ddpm
# steps, the fast preset when it was made; then the draft's own recipe: 30 min, one thread),
# exported beside the default (docs/models.md).
distill: setup build
	for s in 1 2 3; do ./bin/marspec generate --mode target --num-iter 4 --steps 25 --final-step-noise --class all --n 1000 --seed 10$$s --grid none --overwrite --out runs/distill/data$$s; done
	$(PY) scripts/train/train.py --preset draft --minutes 30 --threads 1 --seed 1 --data runs/distill/data1,runs/distill/data2,runs/distill/data3 --out runs/distill/ckpt > runs/distill/train.out 2>&1
	$(PY) scripts/packs/export.py --ckpt runs/distill/ckpt/checkpoint-last.pth --name fmnist-draft-distilled --out runs/distill/pack

export:
	$(PY) scripts/packs/export.py --ckpt runs/target/checkpoint-last.pth --name fmnist-target --out models/target
	$(PY) scripts/packs/export.py --ckpt runs/draft/checkpoint-last.pth --name fmnist-draft --out models/draft

fixtures:
	$(PY) scripts/tests/make_fixtures.py --ckpt runs/target/checkpoint-last.pth --out mar/testdata/parity_target.json

# The GPU path (docs/gpu.md). gpu-setup: ONNX Runtime's GPU build from npm into
# third_party/onnxruntime-gpu; gpu-parts: the same in parts of at most 40 MiB, for a machine
# that cannot reach npm. gpu-bench: the MAR-B GPU run against the official code (8 minutes) into out/gpu-bench/gpu-mar.md;
# gpu-bench-tiny: the same script on the CPU at tiny sizes. official-packs: random-weight
# MAR-B/L/H packs (with KL-16 decoders) in out/packs, for timing; several GB, never committed.
gpu-setup:
	bash scripts/ops/setup_ort.sh --gpu

gpu-parts:
	bash scripts/ops/setup_ort.sh --gpu-parts

gpu-bench:
	bash scripts/gpu/gpu_bench.sh

gpu-bench-tiny:
	bash scripts/gpu/gpu_bench.sh --tiny

official-packs:
	$(PY) scripts/packs/make_random_packs.py --models mar_base,mar_large,mar_huge --out out/packs

# The container image (Dockerfile), with docker or podman, whichever is there: image builds
# marspec:$(git describe) and marspec:latest; image-check also runs the server, the CLI and a
# replica pair from it (scripts/ops/image.sh says what it checks; CI runs it).
image:
	bash scripts/ops/image.sh build

image-check:
	bash scripts/ops/image.sh check
