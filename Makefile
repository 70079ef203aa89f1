# modelship: see README.md. Two Go modules: the product (this folder: api/, cmd/, internal/) and
# the test module (test/: the local environment, simulators, benchmarks, their commands and the
# end-to-end stories); test/chart and hack/tools/* are modules of their own. Tools are built
# from hack/tools/* into bin/ (ignored by git), the test commands from test/cmd/* into bin/ too
# (make tools, or the target that runs one); the control plane binaries into a cache outside
# the checkout (hack/controlplane.sh). The test commands run from this folder (their defaults,
# .work/ and test/traces/, are relative to it).
SHELL := /usr/bin/env bash -o pipefail
BIN := $(CURDIR)/bin
CONTROLLER_GEN := $(BIN)/controller-gen
GOLANGCI_LINT := $(BIN)/golangci-lint
GO_TEST_FLAGS ?=

.PHONY: all
all: build

$(CONTROLLER_GEN): hack/tools/gen/go.mod
	cd hack/tools/gen && go build -o $@ sigs.k8s.io/controller-tools/cmd/controller-gen

$(GOLANGCI_LINT): hack/tools/lint/go.mod
	cd hack/tools/lint && go build -o $@ github.com/golangci/golangci-lint/v2/cmd/golangci-lint

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Deepcopy functions.
	$(CONTROLLER_GEN) object paths=./api/...

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## CRDs and RBAC, into config/ and the Helm chart.
	$(CONTROLLER_GEN) crd:generateEmbeddedObjectMeta=true rbac:roleName=modelship-manager \
		paths=./api/... paths=./internal/controller/... \
		output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac
	mkdir -p charts/modelship/crds
	cp config/crd/bases/*.yaml charts/modelship/crds/
	hack/chart-rbac.sh config/rbac/role.yaml cluster > charts/modelship/templates/clusterrole.yaml
	hack/chart-rbac.sh config/rbac/role.yaml namespaced > charts/modelship/templates/role-namespaced.yaml
	hack/chart-rbac.sh config/rbac/role.yaml leader-election > charts/modelship/templates/leader-election.yaml
	cp config/grafana/modelship.json charts/modelship/dashboards/modelship.json

.PHONY: verify
verify: generate manifests ## Fails when generated files or formatting are stale.
	@git diff --exit-code -- api config charts || { echo "generated files are stale: run 'make generate manifests' and commit"; exit 1; }
	@test -z "$$(git status --porcelain -- api config charts)" || { git status --porcelain -- api config charts; echo "untracked generated files"; exit 1; }
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }

.PHONY: fmt
fmt:
	gofmt -w $$(git ls-files '*.go')

.PHONY: lint
lint: $(GOLANGCI_LINT)
	$(GOLANGCI_LINT) run ./...
	cd test && $(GOLANGCI_LINT) run ./...

.PHONY: build
build: ## The product: the controller and the kubectl plugin, into bin/.
	go build -o $(BIN)/ ./cmd/...

.PHONY: tools
tools: ## The test commands (modelship-bench, -demo, -dev, -fleet-sim) from test/cmd, into bin/.
	cd test && go build -o $(BIN)/ ./cmd/...

.PHONY: envtest-assets
envtest-assets: ## etcd and kube-apiserver for envtest, built once into the cache.
	hack/controlplane.sh assets

.PHONY: controlplane
controlplane: ## The whole local control plane (plus controller-manager, scheduler, kwok).
	hack/controlplane.sh all

.PHONY: gateway
gateway: ## A real Gateway API implementation (Traefik v3.6.12), built once into the cache (~6 min on 2 quiet cores, ~11 on a busy machine).
	hack/traefik.sh

.PHONY: test-gateway
test-gateway: ## The data path through a real Gateway: Traefik routes a weighted HTTPRoute to pod addresses in a network namespace of the test's own (needs root for unshare --net).
	@assets=$$(hack/controlplane.sh assets | tail -n1) && traefik=$$(hack/traefik.sh | tail -n1) && \
	cd test && TRAEFIK=$$traefik KUBEBUILDER_ASSETS=$$assets go test -count=1 -v $(GO_TEST_FLAGS) ./framework/gateway/ ./framework/fleetsim/

# hack/controlplane.sh, hack/prometheus.sh and hack/traefik.sh print their progress (a first run
# builds the control plane for about 25 minutes, Traefik for 6 to 11, or installs Prometheus) on
# stderr; the `>/dev/null` below drops only the path they print on stdout.
#
# The local environment (demo, dev-up, e2e, test-devenv, bench-scale, bench-peers) runs in a
# network namespace of its own, where the fake pods' addresses (198.18.128.0/17) exist: each
# program re-executes itself there (test/framework/gateway.Reexec: `unshare --net` with lo up and
# that range routed on lo; needs root) and refuses to start the environment anywhere else. The
# demo and dev-up keep listeners on this machine's 127.0.0.1 for kubectl, Prometheus and the
# Gateway, forwarded into the namespace.

.PHONY: demo
demo: ## The main job: a local cluster with GPU nodes, Traefik as the Gateway, Prometheus, a simulated fleet and the controller, a rollout and autoscaling printed live (needs root: a network namespace of its own).
	@hack/controlplane.sh all >/dev/null
	@hack/prometheus.sh >/dev/null
	@hack/traefik.sh >/dev/null
	@echo "==> Building the demo (a minute or two on a first run)" >&2
	@cd test && go build -o $(BIN)/modelship-demo ./cmd/modelship-demo
	$(BIN)/modelship-demo $(DEMO_FLAGS)

.PHONY: e2e
e2e: ## End-to-end stories on the local environment (real control plane, Traefik, Prometheus, simulator) in a network namespace of its own (needs root).
	@hack/controlplane.sh all >/dev/null
	@hack/prometheus.sh >/dev/null
	@hack/traefik.sh >/dev/null
	go build -o $(BIN)/testsummary ./hack/testsummary
	cd test && go test -json -count=1 -tags e2e -timeout 30m $(GO_TEST_FLAGS) ./e2e/... | $(BIN)/testsummary

.PHONY: bench-sim
bench-sim: ## Policy simulator: the conversation trace in virtual time, modelship's autoscaler beside HPA and KEDA, each against the offline optimum, then the same over the workload matrix, then the judge over the matrix (38 minutes on two cores, measured 2026-12-07: 18 for the first two, 20 for the judge); CSV and PNG into .work/bench/.
	cd test && go build -o $(BIN)/modelship-bench ./cmd/modelship-bench
	$(BIN)/modelship-bench sim $(SIM_FLAGS)
	$(BIN)/modelship-bench sim --workload matrix $(SIM_MATRIX_FLAGS)
	$(BIN)/modelship-bench sim --judge-only --judge-workloads matrix --judge-candidates 1.25,1.5 $(SIM_JUDGE_FLAGS)

.PHONY: test
test: ## Unit and envtest integration tests against a real kube-apiserver and etcd, of the product and of the test module (the dashboard in headless Chromium, PromQL in Prometheus's promtool); not the end-to-end stories.
	@assets=$$(hack/controlplane.sh assets | tail -n1) && \
	chromium=$$(hack/chromium.sh | tail -n1) && \
	promtool=$$(dirname "$$(hack/prometheus.sh | tail -n1)")/promtool && \
	go build -o $(BIN)/testsummary ./hack/testsummary && \
	{ PROMTOOL=$$promtool CHROMIUM=$$chromium KUBEBUILDER_ASSETS=$$assets go test -json -count=1 $(GO_TEST_FLAGS) ./... ; \
	  (cd test && PROMTOOL=$$promtool CHROMIUM=$$chromium KUBEBUILDER_ASSETS=$$assets go test -json -count=1 $(GO_TEST_FLAGS) ./...) ; \
	  (cd test/chart && KUBEBUILDER_ASSETS=$$assets go test -json -count=1 $(GO_TEST_FLAGS) ./...) ; \
	  (cd hack/tools/image && go test -json -count=1 $(GO_TEST_FLAGS) ./...) ; } | $(BIN)/testsummary

.PHONY: dashboard-screenshots
dashboard-screenshots: ## Re-take docs/dashboard-*.png from the dashboard's browser test (test/dashboard).
	@assets=$$(hack/controlplane.sh assets | tail -n1) && chromium=$$(hack/chromium.sh | tail -n1) && \
	cd test && MODELSHIP_SCREENSHOTS=$(CURDIR)/docs CHROMIUM=$$chromium KUBEBUILDER_ASSETS=$$assets \
	go test -count=1 -run TestDashboardInChromium ./dashboard/

.PHONY: dev-up
dev-up: ## Local cluster with fake GPU nodes, the CRDs, Traefik serving a Gateway and Prometheus, in a network namespace of its own (needs root); Ctrl-C stops it.
	@hack/controlplane.sh all >/dev/null && hack/prometheus.sh >/dev/null && hack/traefik.sh >/dev/null && \
	(cd test && go build -o $(BIN)/modelship-dev ./cmd/modelship-dev) && $(BIN)/modelship-dev up

.PHONY: test-argo
test-argo: ## Argo Rollouts v1.10.1 (hack/peers.sh argo-rollouts) moves a canary's TraefikService weights, Traefik splits by them, in a network namespace of the test's own (needs root for unshare --net).
	@assets=$$(hack/controlplane.sh assets | tail -n1) && traefik=$$(hack/traefik.sh | tail -n1) && hack/peers.sh argo-rollouts >/dev/null && \
	cd test && TRAEFIK=$$traefik KUBEBUILDER_ASSETS=$$assets go test -tags e2e -count=1 -v -run TestArgoRolloutsCanaryThroughTraefik $(GO_TEST_FLAGS) ./bench/peers/

.PHONY: test-devenv
test-devenv: ## End-to-end test of test/framework/devenv (real control plane, kwok GPU nodes, Traefik, Prometheus) in a network namespace of its own (needs root).
	@hack/controlplane.sh all >/dev/null && hack/prometheus.sh >/dev/null && hack/traefik.sh >/dev/null && cd test && go test -tags e2e -count=1 -v ./framework/devenv/

SIZES ?= 100,1000

.PHONY: bench-scale
bench-scale: ## Many ModelServers on one controller (SIZES=100,1000 by default): latency, API requests, writes, memory.
	@hack/controlplane.sh all >/dev/null
	cd test && go build -o $(BIN)/modelship-bench ./cmd/modelship-bench
	$(BIN)/modelship-bench scale --sizes $(SIZES)

.PHONY: bench-peers
bench-peers: ## modelship beside the real KEDA + HPA, Flagger and Argo Rollouts (PEERS_FLAGS="--contenders modelship,flagger,argo-rollouts,keda-hpa") on one local stack (~35 min warm; builds the peers its contenders need once, ~30 min for all): key=value figures, CSV and PNG into .work/bench/peers/.
	@hack/controlplane.sh all >/dev/null && hack/prometheus.sh >/dev/null && hack/traefik.sh >/dev/null && hack/peers.sh for $(PEERS_FLAGS) >/dev/null
	cd test && go build -o $(BIN)/modelship-bench ./cmd/modelship-bench
	$(BIN)/modelship-bench peers $(PEERS_FLAGS)

.PHONY: image
image: ## The controller's OCI image without Docker: bin/image/oci (multi-arch OCI layout) and docker-load tarballs.
	cd hack/tools/image && go run . --version $(or $(VERSION),$(shell git describe --tags --always --dirty 2>/dev/null || echo dev))
