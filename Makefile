# wrapup: finishes AppWrappers when their trigger component finishes.

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

LOCALBIN ?= $(CURDIR)/bin
CONTROLLER_GEN_VERSION ?= v0.20.1
CONTROLLER_GEN ?= $(LOCALBIN)/controller-gen

# The local control plane (kube-apiserver, kube-controller-manager, etcd),
# built from the Go module proxy by test/controlplane/build.sh and cached
# outside the work tree. The first build takes ~17-22 minutes on 2 cores.
CONTROLPLANE_BUILD := test/controlplane/build.sh
GO_TEST_FLAGS ?= -timeout 30m

.PHONY: all
all: build

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target>\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  %-18s %s\n", $$1, $$2 } /^##@/ { printf "\n%s\n", substr($$0, 5) } ' $(MAKEFILE_LIST)

##@ Development

.PHONY: manifests
manifests: controller-gen ## Generate the CRD, RBAC and webhook manifests under config/.
	$(CONTROLLER_GEN) rbac:roleName=wrapup-manager-role crd webhook paths="./api/..." paths="./gc/..." paths="./cmd/..." \
		output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac \
		output:webhook:artifacts:config=config/webhook
	$(MAKE) chart-files

# The chart (charts/wrapup) ships copies of what config/ generates or holds,
# so that both installs say the same; make verify fails if they differ.
CHART := charts/wrapup
.PHONY: chart-files
chart-files: ## Copy the CRDs, the manager's ClusterRole, the default rule, the alerts and the dashboard into the chart.
	mkdir -p $(CHART)/crds $(CHART)/files
	rm -f $(CHART)/crds/*.yaml
	cp config/crd/bases/*.yaml $(CHART)/crds/
	cp config/rbac/role.yaml $(CHART)/files/manager-role.yaml
	cp config/rules/annotated-triggers.yaml config/prometheus/alerts.yaml config/grafana/dashboard.json $(CHART)/files/

.PHONY: generate
generate: controller-gen ## Generate deepcopy code for the API types.
	$(CONTROLLER_GEN) object paths="./api/..."

.PHONY: fmt
fmt: ## go fmt, the nested modules' (test/controlplane, test/tools/*) too.
	go fmt ./...
	gofmt -w test/controlplane test/tools

.PHONY: vet
vet: ## go vet.
	go vet ./...

.PHONY: verify
verify: fmt generate manifests schemas vet ## Regenerate everything; fail if anything generated is stale or untracked.
	@if ! git diff --quiet --exit-code -- . ; then \
		echo "verify: generated or formatted files are stale; run 'make generate manifests fmt' and commit:"; \
		git --no-pager diff --stat -- . ; exit 1; fi
	@untracked="$$(git ls-files --others --exclude-standard -- api config celpolicies/schemas charts)"; \
	if [ -n "$$untracked" ]; then echo "verify: untracked generated files:"; echo "$$untracked"; exit 1; fi

.PHONY: controlplane
controlplane: ## Build (once) the local control plane binaries; prints their folder.
	@$(CONTROLPLANE_BUILD)

# with-controlplane runs a command with KUBEBUILDER_ASSETS set and a
# temporary folder of its own (TMPDIR), then reaps any process the command
# orphaned (a test binary killed by its timeout cannot stop the etcd and
# kube-apiserver it started). The test framework's processes name their
# data, certificate and kubeconfig paths under that folder, and nothing else
# does: an admin's own etcd or kube-apiserver started from the control
# plane's folder is never touched.
define with-controlplane
	assets="$$($(CONTROLPLANE_BUILD))"; rc=0; \
	run="$$(mktemp -d "$${TMPDIR:-/tmp}/wrapup-run.XXXXXX")"; \
	TMPDIR="$$run" KUBEBUILDER_ASSETS="$$assets" $(1) || rc=$$?; \
	pkill -KILL -f -- "$$run/" || true; \
	rm -rf "$$run"; \
	exit $$rc
endef

.PHONY: test
test: generate manifests ## Run every unit and integration test against the local control plane.
	$(call with-controlplane,go test $(GO_TEST_FLAGS) ./...)

.PHONY: test-unit
test-unit: ## Run the unit tests only (no control plane).
	go test $(GO_TEST_FLAGS) ./api/... ./celpolicies/... ./gc/... ./cmd/... ./test/install/...

# The oldest Kubernetes minor the chart claims (charts/wrapup/Chart.yaml
# kubeVersion), pinned in test/controlplane/oldest and built into a cache of
# its own: etcd, kube-apiserver and kube-controller-manager, which the
# integration suite runs on, without JobSet's CRD (v1.30 refuses it).
.PHONY: test-oldest
test-oldest: export WRAPUP_CONTROLPLANE_MODULE := oldest
test-oldest: export WRAPUP_CONTROLPLANE_SKIP := kubectl kube-scheduler helm kwok lws
test-oldest: export WRAPUP_TEST_WITHOUT_JOBSET := 1
test-oldest: ## Run the integration suite against the oldest Kubernetes minor the chart claims (v1.30.14); about 6 minutes, after a first build of 5-15 minutes on 2 cores.
	$(call with-controlplane,go test $(GO_TEST_FLAGS) ./test/integration/...)

# The size of `make sim`.
HISTORIES ?= 100000

.PHONY: sim
sim: ## Run the decision simulation for HISTORIES random histories (default 100000); no control plane.
	go test -count=1 -timeout 12h ./gc -run TestSimulation -v -args -sim.histories=$(HISTORIES)

.PHONY: test-integration
test-integration: ## Run the integration and end-to-end suites against the local control plane.
	$(call with-controlplane,go test $(GO_TEST_FLAGS) ./test/integration/... ./test/e2e/... ./test/multikueue/...)

# The benchmark's size (`make bench N=10000`) and extra flags for it, e.g.
# BENCH_ARGS="-bench.cpuprofile=/tmp/cpu.pprof -bench.waves=100".
N ?= 1000
BENCH_ARGS ?=

.PHONY: bench
bench: ## Scale and latency benchmark: N AppWrappers (default 1000) beside the TTL and AppWrapper baselines; writes test/bench/results/.
	$(call with-controlplane,go test -count=1 -v -timeout 3h ./test/bench/ -run TestBench -args -ginkgo.timeout=3h -bench.n=$(N) -bench.idle=20s -bench.out=$(CURDIR)/test/bench/results $(BENCH_ARGS))

# The throughput benchmark's burst size, steady-load size and heap size;
# its lists are variables, as a comma would end an argument of call.
TP_N ?= 1000
TP_STEADY_N ?= 1000
TP_HEAP_N ?= 10000
TP_CONCURRENCY ?= 1,4,16,64
TP_WORKERS ?= 4,8,16,32
TP_STEADY ?= 0.25,0.5,0.9
.PHONY: bench-throughput
bench-throughput: ## Throughput benchmark: the API server's limit for wrapup's writes, wrapup's and the TTL controller's burst rates, latency under steady Poisson load, live heap per AppWrapper; writes test/bench/results/throughput-TP_N.md and heap-TP_HEAP_N.md.
	$(call with-controlplane,go test -count=1 -v -timeout 3h ./test/bench/throughput/ -args -ginkgo.timeout=3h -tp.n=$(TP_N) -tp.sweep=300 -tp.concurrency=$(TP_CONCURRENCY) -tp.workers=$(TP_WORKERS) -tp.steady=$(TP_STEADY) -tp.steady-n=$(TP_STEADY_N) -tp.heap-n=$(TP_HEAP_N) -tp.out=$(CURDIR)/test/bench/results $(BENCH_ARGS))

MK_RUNS ?= 100
.PHONY: bench-multikueue
bench-multikueue: ## MultiKueue latency: MK_RUNS benchmarks finished on a worker, trigger to the manager's delete and to the next admission, beside one cluster; writes test/bench/results/multikueue-MK_RUNS.md.
	$(call with-controlplane,go test -count=1 -v -timeout 2h ./test/multikueue/ -args -ginkgo.timeout=2h -ginkgo.focus=Latency -mk.runs=$(MK_RUNS) -mk.out=$(CURDIR)/test/bench/results)

GPU_NODES ?= 8
GPU_BENCHMARKS ?= 96
.PHONY: bench-gpu
bench-gpu: ## GPU-utilization benchmark on the bed that runs pods: GPU_NODES nodes of 8 GPUs, GPU_BENCHMARKS benchmarks of 5-30 s, with wrapup and with Kueue's max-exec-time; writes test/bench/results/gpu-*.md.
	$(call with-controlplane,go test -count=1 -v -timeout 2h ./test/bench/gpu/ -args -ginkgo.timeout=2h -gpu.nodes=$(GPU_NODES) -gpu.benchmarks=$(GPU_BENCHMARKS) -gpu.min=5s -gpu.max=30s -gpu.out=$(CURDIR)/test/bench/results)

##@ Build

.PHONY: build
build: ## Build the manager binary.
	CGO_ENABLED=0 go build -trimpath -o $(LOCALBIN)/manager ./cmd/manager

# make demo and make up use neither helm nor the LeaderWorkerSet controller: a
# cold run builds neither.
demo up: export WRAPUP_CONTROLPLANE_SKIP := helm lws
demo up: export WRAPUP_CONTROLPLANE_QUIET := 1

.PHONY: demo
demo: ## Show wrapup at work with Kueue on a local cluster, with the commands an admin runs: a finished benchmark hands its GPUs to the next.
	@$(MAKE) -s build-plugin
	@go build -o $(LOCALBIN)/wrapup-demo ./test/demo
	@$(call with-controlplane,$(LOCALBIN)/wrapup-demo -plugin $(LOCALBIN)/kubectl-wrapup -log $(LOCALBIN)/demo.log)

# The state folder of make up: its kubeconfig, the pids of what it started, its log.
UP_DIR ?= $(LOCALBIN)/up

.PHONY: up
up: ## Start the demo's local cluster (wrapup, Kueue, the AppWrapper controller, a GPU node) and leave it running; prints its KUBECONFIG.
	@$(MAKE) -s build-plugin
	@UP_DIR="$(UP_DIR)" PLUGIN="$(LOCALBIN)/kubectl-wrapup" test/up/up.sh

.PHONY: down
down: ## Stop the local cluster of make up: every process it started, by the pids it recorded.
	@UP_DIR="$(UP_DIR)" test/up/down.sh

IMG ?= ghcr.io/wrapup-dev/wrapup:latest

.PHONY: run
run: manifests ## Run the controller against the cluster of the current kubeconfig.
	go run ./cmd/manager --leader-elect=false --enable-webhook=false

# The release the binaries say they are (kubectl wrapup version).
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
PLUGIN_LDFLAGS = -s -w -X main.version=$(VERSION)
RELEASE_PLATFORMS ?= linux/amd64 linux/arm64 darwin/amd64 darwin/arm64
RELEASE_URL ?= https://github.com/wrapup-dev/wrapup/releases/download
RELEASE_IMAGE ?= ghcr.io/wrapup-dev/wrapup

.PHONY: build-plugin
build-plugin: ## Build the kubectl plugin (kubectl wrapup ...) into bin/.
	CGO_ENABLED=0 go build -trimpath -ldflags "$(PLUGIN_LDFLAGS)" -o $(LOCALBIN)/kubectl-wrapup ./cmd/kubectl-wrapup

.PHONY: release
release: ## Write dist/: install.yaml and rules.yaml (image RELEASE_IMAGE:VERSION), the packaged chart, the plugin for every platform (tarballs, sha256 sums) and its krew manifest.
	@case "$(VERSION)" in v[0-9]*) ;; *) echo "release: VERSION=$(VERSION) is not a release version (v1.2.3)"; exit 2;; esac
	@case "$(VERSION)$(RELEASE_URL)$(RELEASE_IMAGE)" in *[\|\&]*) echo "release: VERSION, RELEASE_URL and RELEASE_IMAGE may not hold | or &"; exit 2;; esac
	rm -rf dist && mkdir -p dist
	assets="$$($(CONTROLPLANE_BUILD))" && \
	"$$assets/kubectl" kustomize config/default > dist/.install.yaml && \
	grep -q 'image: ghcr.io/wrapup-dev/wrapup:latest' dist/.install.yaml && \
	sed 's|image: ghcr.io/wrapup-dev/wrapup:latest|image: $(RELEASE_IMAGE):$(VERSION)|' dist/.install.yaml > dist/install.yaml && rm dist/.install.yaml && \
	"$$assets/kubectl" kustomize config/rules > dist/rules.yaml && \
	"$$assets/helm" package charts/wrapup --version $(VERSION:v%=%) --app-version $(VERSION) --destination dist >/dev/null
	for p in $(RELEASE_PLATFORMS); do \
		os=$${p%/*}; arch=$${p#*/}; d=dist/kubectl-wrapup_$(VERSION)_$${os}_$${arch}; mkdir -p $$d; \
		CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch go build -trimpath -ldflags "$(PLUGIN_LDFLAGS)" -o $$d/kubectl-wrapup ./cmd/kubectl-wrapup; \
		tar -C $$d -czf $$d.tar.gz . && rm -rf $$d; \
	done
	cd dist && sha256sum *.tar.gz > sha256sums.txt
	sed -e 's|RELEASE_URL|$(RELEASE_URL)/$(VERSION)|g' -e 's|RELEASE_VERSION|$(VERSION)|g' \
		$$(for p in $(RELEASE_PLATFORMS); do os=$${p%/*}; arch=$${p#*/}; \
			echo "-e s|SHA256_$${os}_$${arch}|$$(sha256sum dist/kubectl-wrapup_$(VERSION)_$${os}_$${arch}.tar.gz | cut -d' ' -f1)|"; done) \
		.krew.yaml | grep -v '^#' > dist/wrapup.yaml
	cd dist && sha256sum install.yaml rules.yaml wrapup-$(VERSION:v%=%).tgz >> sha256sums.txt
	@echo "release: dist/ holds install.yaml, rules.yaml, the chart wrapup-$(VERSION:v%=%).tgz, $$(ls dist/kubectl-wrapup_*.tar.gz | wc -l) plugin archives, sha256sums.txt and the krew manifest wrapup.yaml"

.PHONY: docker-build
docker-build: ## Build the controller image IMG (needs a Docker engine).
	docker build --build-arg VERSION=$(VERSION) -t $(IMG) .

.PHONY: docker-push
docker-push: ## Push the controller image IMG.
	docker push $(IMG)

##@ Deployment

.PHONY: install
install: manifests ## Install wrapup's CRDs (CompletionRule, CompletionRecord) into the current cluster.
	kubectl apply -k config/crd

.PHONY: uninstall
uninstall: ## Remove wrapup's CRDs from the current cluster, and with them every rule and every CompletionRecord.
	kubectl delete -k config/crd --ignore-not-found

.PHONY: deploy
deploy: manifests ## Install wrapup (CRDs, RBAC, the controller with image IMG, then the rules of config/rules) into the current cluster.
	@case "$(IMG)" in *[\|\&]*) echo "deploy: IMG may not hold | or &"; exit 2;; esac
	mkdir -p $(LOCALBIN) && kubectl kustomize config/default > $(LOCALBIN)/install.yaml
	grep -q 'image: ghcr.io/wrapup-dev/wrapup:latest' $(LOCALBIN)/install.yaml || { echo "deploy: the rendered install names no ghcr.io/wrapup-dev/wrapup:latest image to replace"; exit 1; }
	sed 's|image: ghcr.io/wrapup-dev/wrapup:latest|image: $(IMG)|' $(LOCALBIN)/install.yaml | kubectl apply --server-side -f -
	kubectl wait --for condition=established --timeout=60s crd/completionrules.wrapup.dev
	kubectl apply --server-side -k config/rules

.PHONY: undeploy
undeploy: ## Remove wrapup from the current cluster: its CRDs too, and with them every CompletionRule and CompletionRecord.
	kubectl delete -k config/rules --ignore-not-found
	kubectl delete -k config/default --ignore-not-found

##@ Tools

.PHONY: controller-gen
controller-gen: $(CONTROLLER_GEN) ## Install controller-gen into bin/.
$(CONTROLLER_GEN):
	mkdir -p $(LOCALBIN)
	GOBIN=$(LOCALBIN) go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)

# The OpenAPI v3 documents `kubectl wrapup lint` type-checks against offline:
# built-in kinds as the local control plane's Kubernetes version publishes
# them, and the CRDs of the kinds with built-in expressions from the modules.
module-dir = $(shell go mod download -json $(1) | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$$/\1/p')
SCHEMA_CRDS = $(call module-dir,sigs.k8s.io/jobset)/config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml \
	$(foreach k,pytorchjobs tfjobs xgboostjobs jaxjobs paddlejobs,$(call module-dir,github.com/kubeflow/training-operator)/manifests/base/crds/kubeflow.org_$(k).yaml) \
	$(call module-dir,github.com/kubeflow/mpi-operator)/manifests/base/kubeflow.org_mpijobs.yaml \
	$(call module-dir,github.com/kubeflow/trainer/v2)/manifests/base/crds/trainer.kubeflow.org_trainjobs.yaml \
	$(call module-dir,github.com/ray-project/kuberay/ray-operator)/config/crd/bases/ray.io_rayjobs.yaml \
	$(call module-dir,github.com/kubeflow/spark-operator/v2)/config/crd/bases/sparkoperator.k8s.io_sparkapplications.yaml

# volcano.sh/apis ships the Volcano Job's Go types but not its CRD, which
# Volcano generates from them with controller-gen (hack/generate-yaml.sh):
# so does this. Tekton's and Argo's modules are not in the module graph
# (kubectl wrapup lint says their rules are type-checked only with
# --server-schema).
SCHEMA_GEN_DIR = $(LOCALBIN)/schema-crds

.PHONY: schemas
schemas: controller-gen ## Generate the trigger kinds' OpenAPI documents that kubectl wrapup lint type-checks against (celpolicies/schemas).
	rm -rf celpolicies/schemas/openapi $(SCHEMA_GEN_DIR)
	$(CONTROLLER_GEN) crd:crdVersions=v1 paths="volcano.sh/apis/pkg/apis/batch/v1alpha1" output:crd:dir=$(SCHEMA_GEN_DIR)
	cd test/controlplane && go run ./openapi -out $(CURDIR)/celpolicies/schemas/openapi $(SCHEMA_CRDS) $(SCHEMA_GEN_DIR)/batch.volcano.sh_jobs.yaml
