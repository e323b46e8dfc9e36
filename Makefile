# Train MaxText on Cloud TPU slices through Ray's JaxTrainer on KubeRay; or locally, on a
# real Ray cluster whose simulated TPU hosts run on CPU.
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
export PATH := $(VENV)/bin:$(PATH)

# The demo: a tiny Llama-style model on a simulated v5p-16 slice (2 hosts x 4 chips as CPUs);
# each run trains 40 steps past the latest checkpoint, so a rerun resumes and goes on.
DEMO_ARGS ?= --steps_beyond_checkpoint=40 tiny-llama.yml run_name=demo
# What `make submit` sends: launcher flags, then MaxText's config and key=value arguments.
ARGS ?= $(DEMO_ARGS)
# ARGS only where the user gave them (the GKE targets take flags, not the demo's job).
ARGS_GIVEN = $(if $(filter command line environment,$(origin ARGS)),$(ARGS))
# The slice as Cloud TPU names it (v6e-16, v5p-16, v5litepod-32): the job's --tpu for submit and
# preflight; the simulated slice for `make up` (default v5p-16).
TPU ?=
ADDRESS ?=
# Simulated slices for `make up` (an elastic job's --num_slices), and the one slice-down/up take.
SLICES ?=
SLICE ?=
JOB ?=
PYTEST_ARGS ?=
# Chart: a release, its namespace and the values file of its slice.
RELEASE ?=
NAMESPACE ?= default
VALUES ?= values/v6e-16.yaml
BUCKET ?=
CHART := charts/tpu-stack
# helm from PATH when it is the pinned version (Cloud Shell's may be); else built into .tools.
HELM := $(or $(shell ci/find-helm.sh $(HELM3_VERSION)),$(TOOLS)/helm-$(HELM3_VERSION)/helm)
HELM4 := $(TOOLS)/helm-$(HELM4_VERSION)/helm

##@ Start here

.PHONY: help
help: ## Show the targets.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target> [VAR=value]\n"} \
	  /^[a-zA-Z0-9_-]+:.*?##/ { printf "  \033[36m%-16s\033[0m %s\n", $$1, $$2 } \
	  /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

.PHONY: demo
demo: venv up ## Train the tiny model on the local simulated slice (TPU=v4-16: another); run again to resume.
	$(TL) submit -- $(DEMO_ARGS)

.PHONY: test
test: venv helm cluster-build scanner ## Every tier below, in one pytest run.
	ci/pytest.sh $(PY) $(PYTEST_ARGS)

##@ Test tiers (make test runs them all)

.PHONY: test-unit
test-unit: venv ## Seconds: no Go, no helm, no Ray cluster, no compile.
	ci/pytest.sh $(PY) -m unit $(PYTEST_ARGS)

.PHONY: test-chart
test-chart: venv helm ## The chart with Helm 3 and 4: render, schemas, refusals, goldens.
	ci/pytest.sh $(PY) -m chart $(PYTEST_ARGS)

.PHONY: test-cluster
test-cluster: venv helm cluster-build scanner ## The chart installed into the test control plane (KUBECONFIG_PATH= for another cluster).
	ci/pytest.sh $(PY) -m cluster $(if $(KUBECONFIG_PATH),--kubeconfig $(KUBECONFIG_PATH)) $(PYTEST_ARGS)

.PHONY: test-e2e
test-e2e: venv ## Real Ray cluster on loopback, real MaxText on CPU, faults and resumes.
	ci/pytest.sh $(PY) -m e2e $(PYTEST_ARGS)

.PHONY: test-preflight
test-preflight: venv ## Ahead-of-time compiles for TPU topologies; the bucket check on the GCS emulator.
	ci/pytest.sh $(PY) -m preflight $(PYTEST_ARGS)

.PHONY: test-image
test-image: venv ## The image's install steps from the built wheel in a fresh venv; hadolint; the lock.
	ci/pytest.sh $(PY) -m image $(PYTEST_ARGS)

##@ Jobs

# A values file given on the command line (or RELEASE) names the target slice: submit runs
# preflight for it first (SKIP_PREFLIGHT=1 skips it). The local CPU slice needs no preflight.
TARGET_FLAGS := $(if $(RELEASE),--release $(RELEASE) --namespace $(NAMESPACE),$(if $(filter command line environment,$(origin VALUES)),--values $(VALUES)))
JOB_ARGS = $(if $(TPU),--tpu=$(TPU)) $(ARGS)

.PHONY: submit
submit: venv ## Submit ARGS to ADDRESS, RELEASE (port-forwarded) or the local cluster; follow it.
	$(TL) submit $(if $(ADDRESS),--address $(ADDRESS)) $(TARGET_FLAGS) \
	  $(if $(SKIP_PREFLIGHT),--skip-preflight) -- $(JOB_ARGS)

.PHONY: list
list: venv ## List the cluster's jobs: id, state, run, step, start, duration.
	$(TL) list $(if $(ADDRESS),--address $(ADDRESS)) $(if $(RELEASE),--release $(RELEASE) --namespace $(NAMESPACE))

.PHONY: logs
logs: venv ## Print the logs of JOB (default: the last job submitted from here).
	$(TL) logs $(JOB) $(if $(ADDRESS),--address $(ADDRESS)) $(if $(RELEASE),--release $(RELEASE) --namespace $(NAMESPACE))

.PHONY: status
status: venv ## Show the status of JOB.
	$(TL) status $(JOB) $(if $(ADDRESS),--address $(ADDRESS)) $(if $(RELEASE),--release $(RELEASE) --namespace $(NAMESPACE))

.PHONY: stop
stop: venv ## Stop JOB; its checkpoints stay and a resubmit resumes.
	$(TL) stop $(JOB) $(if $(ADDRESS),--address $(ADDRESS)) $(if $(RELEASE),--release $(RELEASE) --namespace $(NAMESPACE))

.PHONY: preflight
preflight: venv ## Will ARGS fit the slice of TPU, RELEASE or VALUES? AOT-compiles for that TPU on CPU (BUCKET_URL= checks the bucket, ADVISE=1 searches batch, remat and ICI split).
	$(TL) preflight $(or $(TARGET_FLAGS),$(if $(TPU),,--values $(VALUES))) $(if $(BUCKET_URL),--bucket $(BUCKET_URL)) $(if $(ADVISE),--advise) -- $(JOB_ARGS)

##@ Serving

# make generate: the run and the text to continue (exported: the prompt reaches the command
# through the environment, so no quote in it can break the recipe).
RUN ?= demo
export PROMPT ?=
MAX_TOKENS ?= 32
SEED ?= 0
TEMPERATURE ?= 1.0
STEP ?=

.PHONY: generate
generate: venv ## Generate from RUN's latest checkpoint (default demo) with MaxText's engine on the slice: PROMPT="hello" [MAX_TOKENS= SEED= TEMPERATURE=0 STEP=].
	$(TL) generate --run $(RUN) --prompt "$$PROMPT" --max-tokens $(MAX_TOKENS) --seed $(SEED) \
	  --temperature $(TEMPERATURE) $(if $(STEP),--step $(STEP)) $(if $(ADDRESS),--address $(ADDRESS)) \
	  $(if $(RELEASE),--release $(RELEASE) --namespace $(NAMESPACE)) $(if $(filter command line,$(origin ARGS)),-- $(ARGS))

.PHONY: export
export: venv ## Write RUN's latest checkpoint (STEP= another) as a Hugging Face model in <run>/hf/<step>, for vLLM (a job on the cluster).
	$(TL) export --run $(RUN) $(if $(STEP),--step $(STEP)) $(if $(ADDRESS),--address $(ADDRESS)) \
	  $(if $(RELEASE),--release $(RELEASE) --namespace $(NAMESPACE)) $(if $(filter command line,$(origin ARGS)),-- $(ARGS))

# Saxml (a release with serving.engine=saxml): RELEASE= port-forwards its HTTP Service, or
# SAX_URL=http://<address>:8888. MODEL is /sax/<cell>/<name>.
MODEL ?=
MODEL_PATH ?=
CHECKPOINT ?=
REPLICAS ?= 1
SAX_URL ?=
SAX_TARGET = $(if $(SAX_URL),--url $(SAX_URL)) $(if $(RELEASE),--release $(RELEASE) --namespace $(NAMESPACE))

.PHONY: sax-publish sax-generate sax-list sax-unpublish
sax-publish: venv ## Saxml: publish MODEL (MODEL_PATH= the model class, CHECKPOINT= gs://..., REPLICAS=).
	$(TL) sax publish --model "$(MODEL)" --model-path "$(MODEL_PATH)" \
	  $(if $(CHECKPOINT),--checkpoint "$(CHECKPOINT)") --replicas $(REPLICAS) $(SAX_TARGET)
sax-generate: venv ## Saxml: ask MODEL for a completion of PROMPT.
	$(TL) sax generate --model "$(MODEL)" --query "$$PROMPT" $(SAX_TARGET)
sax-list: venv ## Saxml: what the cell serves of MODEL (path, checkpoint, replicas).
	$(TL) sax list --model "$(MODEL)" $(SAX_TARGET)
sax-unpublish: venv ## Saxml: unpublish MODEL.
	$(TL) sax unpublish --model "$(MODEL)" $(SAX_TARGET)

##@ Local cluster

.PHONY: up
up: venv ## Start the local Ray cluster (head + simulated TPU hosts of TPU, default v5p-16; SLICES=2 for two) unless it runs.
	$(TL) up $(if $(TPU),--tpu $(TPU)) $(if $(SLICES),--num-slices $(SLICES))

.PHONY: down
down: venv ## Stop the local Ray cluster.
	$(TL) down

.PHONY: slice-down slice-up
slice-down: venv ## Preempt simulated slice SLICE (default 1): kill its hosts; an elastic job goes on without it.
	$(TL) slice-down $(or $(SLICE),1)

slice-up: venv ## Give simulated slice SLICE (default 1) back; an elastic job grows back at its next resize check.
	$(TL) slice-up $(or $(SLICE),1)

##@ Test control plane (real API server, scheduler, KubeRay, JobSet; kwok fake GKE TPU nodes)

.PHONY: cluster-build
cluster-build: ## Build the control plane's binaries from their Go modules into .tools/cluster (once).
	bash ci/cluster/build.sh >/dev/null

.PHONY: cluster-up
cluster-up: venv cluster-build ## Start it on 127.0.0.1 (reuses a healthy one); prints its KUBECONFIG.
	$(PY) ci/cluster/control_plane.py up

.PHONY: cluster-down
cluster-down: venv ## Stop it and delete its state.
	$(PY) ci/cluster/control_plane.py down

.PHONY: cluster-nodes
cluster-nodes: venv ## Add the fake GKE node pools that VALUES needs to the running control plane.
	$(PY) ci/cluster/gke_nodes.py $(VALUES) | \
	  $(TOOLS)/cluster/kubernetes-$(K8S_VERSION)/kubectl --kubeconfig $(TOOLS)/cluster/run/kubeconfig apply -f -

##@ Chart

.PHONY: helm
helm: $(HELM) $(HELM4) ## Build the pinned Helm 3 and Helm 4 into .tools (from the Go module proxy).

$(TOOLS)/helm-%/helm:
	ci/install-helm.sh $*

.PHONY: scanner
scanner: venv ## Install the pinned checkov the cluster tests scan the live objects with.
	ci/install-checkov.sh $(CHECKOV_VERSION)

.PHONY: template
template: $(HELM) ## Render the chart with VALUES (and BUCKET).
	$(HELM) template $(or $(RELEASE),tpu) $(CHART) -f $(VALUES) \
	  --set global.gcsfuse.bucketName=$(or $(BUCKET),example-bucket)

.PHONY: chart-lint
chart-lint: helm ## helm lint --strict every values file with Helm 3 and Helm 4.
	for f in values/*.yaml; do for h in $(HELM) $(HELM4); do \
	  $$h lint --strict $(CHART) -f $$f --set global.gcsfuse.bucketName=example-bucket >/dev/null \
	    || { echo "lint failed: $$h $$f"; exit 1; }; done; done; echo "chart lint ok"

.PHONY: chart-table
chart-table: venv ## Regenerate the chart's copy of the launcher's TPU table.
	$(TL) tpu-table --json > $(CHART)/files/tpu-table.json

.PHONY: goldens
goldens: venv helm ## Rewrite the golden renders (tests/chart/goldens/) after an intended template change.
	$(PY) -m tests.support.goldens --write

.PHONY: docs
docs: venv ## Regenerate the chart's values reference from the values.yaml comments.
	$(PY) ci/values_docs.py $(CHART)/values.yaml --write $(CHART)/README.md

##@ GKE (PROJECT_ID, CLUSTER_NAME, LOCATION, BUCKET from the environment; ARGS= more flags)

GKE_FLAGS = $(foreach v,$(VALUES),--values $(v)) --release $(or $(RELEASE),tpu) \
  --namespace $(NAMESPACE) --chart $(CHART) --helm $(HELM)

.PHONY: gke-plan gke-up gke-down image install uninstall
gke-plan: venv $(HELM) ## Print what gke-up runs for VALUES: cluster, pools, registry, image, bucket, IAM.
	@$(TL) gke plan $(GKE_FLAGS) $(ARGS_GIVEN)
gke-up: venv $(HELM) ## Make it with gcloud (skips what exists, stops at the first failure).
	$(TL) gke up $(GKE_FLAGS) $(ARGS_GIVEN)
image: venv $(HELM) ## Build and push the launcher image the release pulls (Cloud Build, or a local Docker).
	$(TL) image $(GKE_FLAGS) $(ARGS_GIVEN)
install: venv $(HELM) ## helm upgrade --install RELEASE (default tpu) with VALUES and the image gke-up pushed.
	$(TL) install $(GKE_FLAGS) $(ARGS_GIVEN)
uninstall: $(HELM) ## helm uninstall RELEASE (node pools stay and bill: gke-down deletes them).
	$(HELM) uninstall $(or $(RELEASE),tpu) -n $(NAMESPACE)
gke-down: venv $(HELM) ## Delete what gke-up made; the bucket and its checkpoints stay (asks first).
	$(TL) gke down $(GKE_FLAGS) $(ARGS_GIVEN)

##@ Development

.PHONY: venv
venv: $(VENV)/.installed ## Create .venv from the lock (Python 3.12).

$(UV):
	@echo "installing uv $(UV_VERSION) into $(TOOLS)"
	$(PYTHON) -m venv $(TOOLS)/uv-$(UV_VERSION)
	$(TOOLS)/uv-$(UV_VERSION)/bin/pip install --quiet uv==$(UV_VERSION)

$(VENV)/.installed: $(LOCK) $(DEV_LOCK) pyproject.toml | $(UV)
	[ -x $(PY) ] || $(UV) venv --quiet --python $(PYTHON) $(VENV)
	$(UV) pip sync --quiet --python $(PY) $(DEV_LOCK)
	$(UV) pip install --quiet --python $(PY) --no-deps -e .
	touch $@

.PHONY: lock
LOCK_FLAGS := --python-version 3.12 --python-platform x86_64-manylinux_2_31 --generate-hashes
lock: | $(UV) ## Re-resolve the locks from pyproject.toml (linux x86_64, Python 3.12).
	$(UV) pip compile --quiet pyproject.toml $(LOCK_FLAGS) -o $(LOCK)
	# The test environment: the image's lock plus the dev tools, pinned to the same versions.
	$(UV) pip compile --quiet pyproject.toml --extra dev $(LOCK_FLAGS) -c $(LOCK) -o $(DEV_LOCK)

.PHONY: hadolint
hadolint: venv ## Lint the Dockerfile.
	$(VENV)/bin/hadolint images/launcher/Dockerfile

.PHONY: lint
lint: venv ## ruff (lint and format) over the Python code, shellcheck over the shell scripts.
	$(VENV)/bin/ruff check launcher tests ci benchmarks
	$(VENV)/bin/ruff format --check launcher tests ci benchmarks
	$(VENV)/bin/shellcheck -x -P SCRIPTDIR ci/*.sh ci/cluster/*.sh .ci/run

.PHONY: format
format: venv ## ruff format the Python code.
	$(VENV)/bin/ruff format launcher tests ci benchmarks

.PHONY: bench
bench: venv helm cluster-build ## Benchmarks: launcher overhead, worker start, generate/export, preflight/advice timing and calibration, install-to-ready.
	$(PY) benchmarks/launcher_overhead.py
	$(PY) benchmarks/worker_start.py
	$(PY) benchmarks/serving_path.py
	$(PY) benchmarks/preflight_timing.py
	$(PY) benchmarks/advice_calibration.py
	$(PY) benchmarks/cluster_install_ready.py
