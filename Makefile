# Developer tasks: the environment, the checks, the test tiers, the generated files, the
# benchmarks. The product's surface is `tpu-launcher` (`.venv/bin/tpu-launcher --help`); the few
# aliases below pass ARGS to it unchanged.
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help
MAKEFLAGS += --no-print-directory

include ci/versions.env
TOOLS := $(CURDIR)/.tools
VENV := $(CURDIR)/.venv
LOCK := images/launcher/requirements.lock
DEV_LOCK := images/launcher/requirements-dev.lock
PYTHON ?= $(shell ci/find-python.sh)
UV := $(TOOLS)/uv-$(UV_VERSION)/bin/uv
PY := $(VENV)/bin/python
TL := $(VENV)/bin/tpu-launcher
CHART := charts/tpu-stack
# helm from PATH when it is the pinned version (Cloud Shell's may be); else built into .tools.
HELM := $(or $(shell ci/find-helm.sh $(HELM3_VERSION)),$(TOOLS)/helm-$(HELM3_VERSION)/helm)
HELM4 := $(TOOLS)/helm-$(HELM4_VERSION)/helm
PROMETHEUS_DIR := $(TOOLS)/prometheus-$(firstword $(subst +, ,$(PROMETHEUS_DEB_VERSION)))
export PATH := $(VENV)/bin:$(dir $(HELM)):$(PROMETHEUS_DIR):$(PATH)
# What the aliases and the test targets pass on: `make submit ARGS="--release tpu -- ..."`.
ARGS ?=
PYTEST_ARGS ?=

.PHONY: help
help: ## Show the targets.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target> [ARGS=...]\n"} \
	  /^[a-zA-Z0-9_-]+:.*?##/ { printf "  \033[36m%-14s\033[0m %s\n", $$1, $$2 } \
	  /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Aliases of tpu-launcher commands (ARGS: that command's options)

.PHONY: demo submit preflight up down preempt
demo: venv ## tpu-launcher demo: the tiny model on the local simulated slice; again resumes.
	$(TL) demo $(ARGS)
submit: venv ## tpu-launcher submit $(ARGS), e.g. ARGS="--release tpu -- base.yml run_name=r".
	$(TL) submit $(ARGS)
preflight: venv ## tpu-launcher preflight $(ARGS), e.g. ARGS="--values values/v6e-16.yaml -- ...".
	$(TL) preflight $(ARGS)
up: venv prometheus ## tpu-launcher up --prometheus $(ARGS): the local Ray cluster (simulated v5p-16 by default) and a Prometheus scraping it.
	$(TL) up --prometheus $(ARGS)
down: venv ## tpu-launcher down: stop the local Ray cluster (and its Prometheus).
	$(TL) down $(ARGS)
preempt: venv ## tpu-launcher local preempt: SLICE=N or HOST=N taken back as GKE does (notice, kill, return).
	$(TL) local preempt $(if $(SLICE),--slice $(SLICE)) $(if $(HOST),--host $(HOST)) $(ARGS)

##@ Tests (make test runs every tier; each tier alone: make test-<tier>)

.PHONY: test test-unit test-chart test-cluster test-e2e test-preflight test-image test-node
# The control plane is built before the tests, not beside them: Ray runs its workers at nice 15,
# and a Go build beside the e2e tier starved its jobs (a 2-minute job took over 7).
# The node tier is not in it (make test-node): beside the e2e tier, yielding the CPU as the other
# worker's tiers do, its API server could not apply KubeRay's CRDs within its own 60 s (CI's run
# at c7ae875); after it, its cold images and pods add about 20 minutes to a run of about 60.
test: venv helm cluster-build scanner torch-tpu ## Every tier but the node tier, in one pytest run on two workers (tests/conftest.py).
	ci/pytest.sh $(PY) -n 2 -m "not node" $(PYTEST_ARGS)
test-unit: venv ## Seconds: no Go, no helm, no Ray cluster, no compile.
test-chart: venv helm ## The chart with Helm 3 and 4: render, schemas, refusals, goldens.
test-cluster: venv helm cluster-build scanner ## The chart installed into the test control plane.
test-e2e: venv ## A real Ray cluster on loopback, real MaxText on CPU, faults and resumes.
test-preflight: venv ## Ahead-of-time compiles for TPU topologies; the bucket check (emulator).
test-image: venv torch-tpu ## The image's install steps from the built wheel; hadolint; the lock; TorchTPU's slice.
test-node: venv helm node-build ## The chart's pods on a real node (root): policies enforced, Ray in pods.
test-unit test-chart test-cluster test-e2e test-preflight test-image test-node:
	ci/pytest.sh $(PY) -m $(@:test-%=%) $(PYTEST_ARGS)

.PHONY: verify
verify: venv helm lint ## Every static check: ruff, format, mypy, shellcheck, hadolint, chart lint, drift.
	$(VENV)/bin/mypy
	$(VENV)/bin/hadolint images/launcher/Dockerfile ci/node/vllm-standin/Dockerfile
	$(MAKE) chart-lint
	$(PY) ci/values_docs.py $(CHART)/values.yaml --check $(CHART)/README.md
	$(TL) tpu-table --json | diff -q - $(CHART)/files/tpu-table.json \
	  || { echo "$(CHART)/files/tpu-table.json is stale: run make chart-table"; exit 1; }
	$(PY) ci/schema_enums.py $(CHART)/values.schema.json --check
	$(TL) dashboard | diff -q - $(CHART)/files/grafana-dashboard.json \
	  || { echo "$(CHART)/files/grafana-dashboard.json is stale: run make chart-dashboard"; exit 1; }
	$(PY) ci/maxtext_configs.py --check
	$(PY) ci/vllm_engine_args.py --check
	$(PY) ci/commands_doc.py --check
	$(PY) -m tests.support.goldens
	@echo "verify: ok"

.PHONY: lint format
lint: venv ## ruff (lint and format check) and shellcheck: the quick part of verify.
	$(VENV)/bin/ruff check launcher harness tests ci benchmarks
	$(VENV)/bin/ruff format --check launcher harness tests ci benchmarks
	$(VENV)/bin/shellcheck -x -P SCRIPTDIR ci/*.sh ci/cluster/*.sh ci/node/*.sh .ci/run
format: venv ## ruff format the Python code.
	$(VENV)/bin/ruff format launcher harness tests ci benchmarks

##@ Test clusters (real API server, scheduler, KubeRay, JobSet; kwok fake GKE TPU nodes; the node tier's real node)

.PHONY: cluster-build cluster-up cluster-down node-build node-up node-down
cluster-build: ## Build its binaries from their Go modules into .tools/cluster (once).
	bash ci/cluster/build.sh >/dev/null
cluster-up: venv cluster-build ## Start it on 127.0.0.1 (reuses a healthy one); prints its KUBECONFIG.
	$(PY) ci/cluster/control_plane.py up
cluster-down: venv ## Stop it and delete its state.
	$(PY) ci/cluster/control_plane.py down
node-build: cluster-build ## The node tier's Debian packages (root) and its kubelet, kube-proxy, kube-router, CoreDNS.
	bash ci/node/install-deps.sh
	bash ci/cluster/build.sh node-kubernetes kube-router coredns bucket-csi >/dev/null
node-up: venv node-build ## A real node (containerd, kubelet) joined to a control plane of its own; prints its KUBECONFIG.
	$(PY) ci/node/node.py up
node-down: venv ## Stop the node and its control plane; delete their state (images are kept).
	$(PY) ci/node/node.py down

##@ Chart and generated files

.PHONY: helm scanner torch-tpu prometheus chart-lint chart-table chart-dashboard chart-vllm-args goldens docs maxtext-configs commands-doc
helm: $(HELM) $(HELM4) ## Build the pinned Helm 3 and Helm 4 into .tools (from the Go module proxy).
$(TOOLS)/helm-%/helm:
	ci/install-helm.sh $*
prometheus: ## Unpack the pinned Prometheus (Debian's package) into .tools, for up --prometheus.
	ci/install-prometheus.sh >/dev/null
scanner: venv ## Install the pinned checkov the cluster tests scan the live objects with.
	ci/install-checkov.sh $(CHECKOV_VERSION)
torch-tpu: venv ## Install the torch image's pinned TorchTPU into .tools (the image tests compare its slice variables).
	ci/install-torch-tpu.sh
chart-lint: helm ## helm lint --strict every values file with Helm 3 and Helm 4.
	for f in values/*.yaml; do for h in $(HELM) $(HELM4); do \
	  $$h lint --strict $(CHART) -f $$f --set global.gcsfuse.bucketName=example-bucket >/dev/null \
	    || { echo "lint failed: $$h $$f"; exit 1; }; done; done; echo "chart lint ok"
chart-table: venv ## Regenerate the chart's copy of the launcher's TPU table and the schema's enums.
	$(TL) tpu-table --json > $(CHART)/files/tpu-table.json
	$(PY) ci/schema_enums.py $(CHART)/values.schema.json --write
chart-dashboard: venv ## Regenerate the chart's Grafana dashboard from the launcher's metrics.
	$(TL) dashboard > $(CHART)/files/grafana-dashboard.json
chart-vllm-args: venv ## Rewrite the chart's list of the pinned vLLM's engine arguments (vllm.engineKwargs is checked against it).
	$(PY) ci/vllm_engine_args.py --write
maxtext-configs: venv ## Rewrite the launcher's copy of the pinned MaxText's configs (a client without MaxText checks jobs with it).
	$(PY) ci/maxtext_configs.py --write
commands-doc: venv ## Rewrite docs/commands.md's table of commands from the parsers.
	$(PY) ci/commands_doc.py --write
goldens: venv helm ## Rewrite the golden renders (tests/chart/goldens/) after an intended change.
	$(PY) -m tests.support.goldens --write
docs: venv ## Regenerate the chart's values reference from the values.yaml comments.
	$(PY) ci/values_docs.py $(CHART)/values.yaml --write $(CHART)/README.md

##@ Environment, image, benchmarks

.PHONY: venv lock image bench
venv: $(VENV)/.installed ## Create .venv from the lock (Python 3.12).
$(UV):
	@echo "installing uv $(UV_VERSION) into $(TOOLS)"
	$(PYTHON) -m venv $(TOOLS)/uv-$(UV_VERSION)
	$(TOOLS)/uv-$(UV_VERSION)/bin/pip install --quiet uv==$(UV_VERSION)

$(VENV)/.installed: $(LOCK) $(DEV_LOCK) pyproject.toml | $(UV)
	[ -x $(PY) ] || $(UV) venv --quiet --python $(PYTHON) $(VENV)
	# Bytecode compiled once here (pip's default, not uv's): without it every process compiles
	# each module it imports, and where PYTHONDONTWRITEBYTECODE is set, at every start (a Ray
	# host's import of MaxText's trainer: 14.4 s, 6.6 s with it; benchmarks/worker_start.py).
	$(UV) pip sync --quiet --compile-bytecode --python $(PY) $(DEV_LOCK)
	$(UV) pip install --quiet --compile-bytecode --python $(PY) --no-deps -e .
	touch $@

LOCK_FLAGS := --python-version 3.12 --python-platform x86_64-manylinux_2_31 --generate-hashes
lock: | $(UV) ## Re-resolve the locks: the JAX image's, the torch image's, the tests' (linux x86_64, Python 3.12).
	$(UV) pip compile --quiet pyproject.toml --extra runtime $(LOCK_FLAGS) \
	  --override images/launcher/requirements-excluded.txt -o $(LOCK)
	$(UV) pip compile --quiet pyproject.toml --extra torch $(LOCK_FLAGS) -o images/launcher/requirements-torch.lock
	$(UV) pip compile --quiet pyproject.toml --extra runtime --extra dev $(LOCK_FLAGS) -c $(LOCK) \
	  --override ci/dev-overrides.txt -o $(DEV_LOCK)

image: venv helm ## tpu-launcher image $(ARGS): build and push the launcher image a release pulls.
	$(TL) image $(ARGS)

BENCHMARKS := launcher_overhead worker_start serving_path preflight_timing advice_calibration \
  cluster_install_ready input_pipeline data_prepare compile_cache checkpoint_tiers
bench: venv helm cluster-build ## The benchmarks (on the local cluster, started if none runs): figures, ratios.
	$(TL) up && for b in $(BENCHMARKS); do $(PY) benchmarks/$$b.py || exit 1; done
