# Every target installs what it needs into .venv first; re-running is quick.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
REPO := model_repository
HTTP_PORT ?= 8000
GRPC_PORT ?= 8001
METRICS_PORT ?= 8002
HOST ?= 127.0.0.1
PYTEST_ARGS ?=

.PHONY: help setup backends models system-deps demo test k8s-check serve bench bench-resnet50 bench-bert bench-nmt bench-nmt-rnn bench-precision bench-loadgen loadtest tune soak plans-dry-run mutation docker-requirements lint format clean

help: ## List the targets
	@grep -E '^[a-z0-9_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check --upgrade pip 2>&1 | grep -v '^WARNING: Location' || true
	$(PY) -m pip install -q --disable-pip-version-check -e '.[dev]' 2>&1 | grep -v '^WARNING: Location' ; test $${PIPESTATUS[0]} -eq 0
	@touch $@

setup: $(STAMP) ## Create .venv with every dependency (idempotent)

# Each family rebuilds when the build code or the python models it serves change.
BUILD_DEPS := $(STAMP) $(shell find triton_kit/build_engines triton_kit/python_models -name "*.py")

$(REPO)/.resnet50.built: $(BUILD_DEPS)
	$(PY) -m triton_kit.build_engines resnet50
	@touch $@

$(REPO)/.bert.built: $(BUILD_DEPS)
	$(PY) -m triton_kit.build_engines bert
	@touch $@

# The default nmt: CTranslate2 int8, nmt itself the kit's ctranslate2 backend in text mode
# (sentencepiece inside it: libsentencepiece-dev; build_engines nmt --help).
$(REPO)/.nmt.built: $(BUILD_DEPS) $(wildcard assets/nmt-en-fr-numbers/*)
	$(PY) -m triton_kit.build_engines nmt
	@touch $@

$(REPO)/.nmt_rnn.built: $(BUILD_DEPS) $(wildcard assets/nmt-rnn-en-fr-numbers/* assets/nmt-en-fr-numbers/*)
	$(PY) -m triton_kit.build_engines nmt --architecture rnn
	@touch $@

MODELS := $(REPO)/.resnet50.built $(REPO)/.bert.built $(REPO)/.nmt.built $(REPO)/.nmt_rnn.built

models: $(MODELS) ## Build every model into model_repository/ (skips what is up to date)

# Triton's own onnxruntime and pytorch backends (r24.10 sources, ../shared/triton-src or
# GitHub) compiled against .venv's onnxruntime and torch, and the kit's own ctranslate2 backend
# against .venv's ctranslate2 wheel and the system's sentencepiece (the default nmt is its text
# mode, the default nmt_rnn's nmt_rnn_generate runs in the pytorch one; system-deps installs libsentencepiece-dev, and the build warns loudly without it);
# skipped when nothing changed. The models do not need them to build (the nmt build checks its CTranslate2 model
# with the ctranslate2 wheel in process); serving them does (demo, test, serve, bench).
backends: $(STAMP) | system-deps ## Build Triton's onnxruntime and pytorch backends and the kit's ctranslate2 backend for the embedded server
	$(PY) -m triton_kit.server.native_backends build

system-deps: $(STAMP) ## Prometheus, docker-compose and hadolint for the deployment tests
	bash scripts/install-system-deps.sh

# The Locust gRPC user's native sidecar; without g++/libgrpc++-dev the script says so and
# the load test uses the Python sidecar (system-deps installs them as root).
NATIVE_SIDECAR := $(VENV)/bin/triton-kit-grpc-sidecar
$(NATIVE_SIDECAR): $(STAMP) $(wildcard triton_kit/loadtest/sidecar/native/*) | system-deps
	bash scripts/build-native-sidecar.sh $(VENV)

demo: models backends ## The main job: build, serve, call every model, short load test, results table
	$(PY) demo.py

test: models backends system-deps $(NATIVE_SIDECAR) k8s-check ## Run the test suite against a real Triton server (and make k8s-check)
	$(PY) -m pytest $(PYTEST_ARGS)

# checkov's dependencies pin versions the project's .venv does not share: own venv under build/.
CHECKOV_VENV := build/checkov-venv
CHECKOV_SPEC := checkov==3.3.30
$(CHECKOV_VENV)/bin/checkov:
	$(PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/pip install -q --disable-pip-version-check '$(CHECKOV_SPEC)' 2>&1 | grep -v '^WARNING: Location' ; test $${PIPESTATUS[0]} -eq 0

# Policy exceptions are annotations on the objects (checkov.io/skipN, with reasons) except
# CKV_K8S_43 (pin images by digest): the images are built and pushed by the user, so no
# digest exists until then; pin them with `kustomize edit set image NAME@sha256:...`.
k8s-check: $(STAMP) system-deps $(CHECKOV_VENV)/bin/checkov ## Render deploy/k8s into build/k8s/, validate every object offline, policy-scan with checkov
	$(PY) deploy/k8s/check.py --out build/k8s
	BC_SKIP_MAPPING=TRUE $(CHECKOV_VENV)/bin/checkov -d build/k8s --framework kubernetes \
		--quiet --compact --skip-check CKV_K8S_43 2>&1 | grep -v -i 'prismacloud\|urllib3\|Failed to get the checkov mappings' ; test $${PIPESTATUS[0]} -eq 0

serve: models backends ## Run the embedded Triton in the foreground (HTTP_PORT, GRPC_PORT, METRICS_PORT, HOST)
	$(PY) -m triton_kit.server serve --model-repository $(REPO) --host $(HOST) \
		--http-port $(HTTP_PORT) --grpc-port $(GRPC_PORT) --metrics-port $(METRICS_PORT)

bench-resnet50: models backends ## Benchmark ResNet-50: in-process ORT vs Triton; writes benchmarks/results/resnet50.md
	$(PY) -m triton_kit.benchmarks.resnet50

$(VENV)/bin/perf_analyzer: $(STAMP)
	bash scripts/install-perf-analyzer.sh $(VENV)

bench-bert: models backends $(VENV)/bin/perf_analyzer ## Benchmark BERT: in-process ORT vs Triton (Python SDK and perf_analyzer), buckets vs max padding
	$(PY) -m triton_kit.benchmarks.bert

bench-nmt: models backends ## Benchmark NMT: in-process vs Triton vs CTranslate2
	$(PY) -m triton_kit.benchmarks.nmt

bench-nmt-rnn: models backends ## Benchmark the recurrent NMT (nmt_rnn) beside the Transformer
	$(PY) -m triton_kit.benchmarks.nmt --architecture rnn

bench-precision: models backends ## Accuracy and CPU speed of FP32/FP16/INT8 for every family
	$(PY) -m triton_kit.benchmarks.precision

# GEVENT_RESOLVER=block: gevent's threadpool DNS resolver hangs in a forked mutant child.
mutation: models ## Mutation score over python_models, client, loadtest summary/recorder (slow; not in CI)
	rm -rf mutants
	GEVENT_RESOLVER=block MODEL_REPOSITORY=$(CURDIR)/$(REPO) $(VENV)/bin/mutmut run --max-children 2 $(MUTATION_SELECT)
	$(VENV)/bin/mutmut results

plans-dry-run: models ## TensorRT plan of work and trtexec command for every ONNX model (no TensorRT needed)
	$(PY) -m triton_kit.build_engines.engines.tensorrt --precision fp16

MUTATION_SELECT ?=
LOADTEST_STEPS ?= 1,2,4,8
LOADTEST_STEP_TIME ?= 12
LOADTEST_SETTLE_TIME ?= 4
LOADTEST_MODELS ?= resnet50,bert,nmt
LOADTEST_PROTOCOLS ?= grpc,http
SLO_P99_MS ?=
SLO_ERROR_RATIO ?=
LOADTEST_ARGS ?=

loadtest: models backends $(NATIVE_SIDECAR) ## Stepped Locust load on the embedded Triton; reports in reports/loadtest/<time>/ (LOADTEST_STEPS, LOADTEST_STEP_TIME, LOADTEST_MODELS, LOADTEST_PROTOCOLS, SLO_P99_MS, SLO_ERROR_RATIO)
	$(PY) -m triton_kit.loadtest run --steps $(LOADTEST_STEPS) --step-time $(LOADTEST_STEP_TIME) \
		--settle-time $(LOADTEST_SETTLE_TIME) --models $(LOADTEST_MODELS) \
		--protocols $(LOADTEST_PROTOCOLS) \
		$(if $(SLO_P99_MS),--slo-p99-ms $(SLO_P99_MS)) \
		$(if $(SLO_ERROR_RATIO),--slo-error-ratio $(SLO_ERROR_RATIO)) $(LOADTEST_ARGS)

# Model Analyzer pins numpy 2 and its own tritonclient: loadtest tune makes its venv in build/.
TUNE_MODELS ?= resnet50_model bert nmt
MIN_THROUGHPUT ?=
TUNE_ARGS ?=
ifneq ($(filter tune,$(MAKECMDGOALS)),)
ifeq ($(SLO_P99_MS),)
$(error make tune needs SLO_P99_MS=<p99 budget in ms>)
endif
endif

tune: models backends $(VENV)/bin/perf_analyzer ## Best Triton config per model under SLO_P99_MS (Triton Model Analyzer); reports/tune/<time>/ (TUNE_MODELS, MIN_THROUGHPUT, TUNE_ARGS=--apply)
	$(PY) -m triton_kit.loadtest tune $(TUNE_MODELS) --slo-p99-ms $(SLO_P99_MS) \
		$(if $(MIN_THROUGHPUT),--min-throughput $(MIN_THROUGHPUT)) $(TUNE_ARGS)

bench-loadgen: $(STAMP) $(NATIVE_SIDECAR) ## Calibrate the Locust load generator against a plain asyncio client
	$(PY) -m triton_kit.benchmarks.loadgen

SOAK_MINUTES ?= 30
SOAK_LOAD ?= 0.8

soak: models backends ## Mixed traffic at SOAK_LOAD (0.8) of measured max for SOAK_MINUTES (30): errors, p99 drift, RSS per process
	$(PY) -m triton_kit.benchmarks.soak --minutes $(SOAK_MINUTES) --load $(SOAK_LOAD)

bench: bench-resnet50 bench-bert bench-nmt bench-nmt-rnn bench-precision bench-loadgen ## Run every benchmark

# pyproject.toml's extras are the one list; the images' requirement files are written from them
# (tests/unit/test_docker_requirements.py fails where a checked-in file differs).
docker-requirements: ## Write docker/requirements-*.txt from pyproject.toml's extras (stub, export, locust)
	$(PYTHON) scripts/docker_requirements.py

lint: system-deps ## ruff, mypy on the client SDK, and check that server-side Python runs on the container's 3.10
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/vermin -q --no-tips --violations -t=3.10- triton_kit/python_models triton_kit/server/native_backends docker
	$(VENV)/bin/hadolint docker/*.Dockerfile
	$(PY) scripts/docker_requirements.py --check
	GRAFANA_ADMIN_PASSWORD=lint TRITON_KIT_API_KEY=lint docker-compose config -q

format: $(STAMP)
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

clean: ## Remove built models, logs and reports (keeps .venv)
	find $(REPO) -mindepth 1 -maxdepth 1 ! -name README.md -exec rm -rf {} +
	rm -rf logs reports build
