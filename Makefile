# Spaces — one Makefile for local use, tests and SAM builds (BuildMethod: makefile).
SHELL := /bin/bash
GO    ?= go
ORG   ?= acme
SCOPE ?=
# The local stack (make run, and nothing else) keeps emulator data and the
# development JWT key here. Tests never read or write it.
LOCAL := .local
KUMO_DATA_DIR ?= $(abspath $(LOCAL))/emulator

# Lambda binaries: Linux arm64, static, no RPC shim, reproducible.
LAMBDA_ENV   := GOOS=linux GOARCH=arm64 CGO_ENABLED=0
LAMBDA_FLAGS := -tags lambda.norpc -trimpath -ldflags="-s -w"

# The embedded emulator needs patches (stream records for transactions,
# persistence only where asked for; see infra/emulator/kumo/overlay.sh): a
# patched copy of kumo outside the repo and a go.mod that replaces kumo with
# it, passed as -modfile (Go forbids -overlay on files in the module cache).
# WITH_OVERLAY starts a recipe line: it builds the overlay and stops the
# recipe, loudly, when it cannot, so nothing ever runs unpatched.
WITH_OVERLAY = modfile=$$(bash infra/emulator/kumo/overlay.sh) && export GOFLAGS="$(strip $(GOFLAGS)) -modfile=$$modfile" &&

.PHONY: run test test-stress lint lint-tools sam-check token deps kube-bins tofu browser tour-tools vet bench fuzz build clean overlay agent-image spaces terraform-provider generate
.DEFAULT_GOAL := run

## run: the whole service locally (embedded AWS emulator, API on 127.0.0.1:8080)
run: deps
	@mkdir -p $(KUMO_DATA_DIR)
	$(WITH_OVERLAY) KUMO_DATA_DIR=$(KUMO_DATA_DIR) $(GO) run ./infra/cmd/local

## test: the lints, then every test, after installing what they need (modules, kube-apiserver + etcd, tofu, chromium, the tour's curl and jq)
# infra/local starts the whole stack in each test, and its tests mostly wait
# (on Chromium, the stack's clock, a real kube-apiserver): one after another
# they would be most of the suite's time with the machine idle. So its browser
# tests (TestConsole*) and its other tests are two more `go test` runs beside
# the other packages' (infra/parallel.sh: each prints whole as it ends).
TEST_FLAGS := -count=1 -timeout 20m
# The suite's runs, one place for make test and make test-stress; the
# last, the patched emulator's own DynamoDB tests (with the overlay's, e.g.
# its TTL reaper's: infra/emulator/kumo/overlay.sh), in the patched copy.
RUN_TESTS = bash infra/parallel.sh \
		"$(GO) test $(TEST_FLAGS) $$($(GO) list ./... | grep -v '/infra/local$$' | tr '\n' ' ')" \
		"$(GO) test $(TEST_FLAGS) -skip '^TestConsole' ./infra/local" \
		"$(GO) test $(TEST_FLAGS) -run '^TestConsole' ./infra/local" \
		"cd $$(sed -n 's/^replace github.com\/sivchari\/kumo .* => //p' $$modfile) && GOFLAGS= $(GO) test $(TEST_FLAGS) ./internal/service/dynamodb/"
test: lint sam-check deps kube-bins tofu browser tour-tools
	unset KUMO_DATA_DIR && $(WITH_OVERLAY) $(GO) vet ./... && $(RUN_TESTS)

## test-stress: the tests of make test N times (default 3) with a busy loop on every core beside them; prints ok/FAIL and the failed tests per run: make test-stress N=3
# A test that passes only on an idle machine measures the machine: this
# shakes such tests out. Its runs are make test's (RUN_TESTS); the
# hogs are this recipe's children, stopped on any exit. Not part of make test.
N ?= 3
test-stress: deps kube-bins tofu browser tour-tools
	@unset KUMO_DATA_DIR && $(WITH_OVERLAY) $(GO) vet ./... && \
	hogs=(); for _ in $$(seq 1 $$(nproc)); do { while :; do :; done; } & hogs+=($$!); done; \
	trap 'kill $${hogs[@]} 2>/dev/null' EXIT; \
	echo "test-stress: $(N) runs beside $${#hogs[@]} busy loops"; failed=0; \
	for run in $$(seq 1 $(N)); do \
		log=$$(mktemp); \
		if $(RUN_TESTS) >"$$log" 2>&1; then \
			echo "run $$run/$(N): ok"; \
		else \
			failed=$$((failed + 1)); \
			echo "run $$run/$(N): FAIL $$(grep -oE -- '--- FAIL: [^ ]+' "$$log" | sed 's/--- FAIL: //' | sort -u | tr '\n' ' ')(log $$log)"; \
			grep -E -- '^(--- FAIL|FAIL|panic:)|_test\.go:[0-9]+:' "$$log" | head -40; \
			continue; \
		fi; \
		rm -f "$$log"; \
	done; \
	echo "test-stress: $$(($(N) - failed))/$(N) runs ok"; [ $$failed -eq 0 ]

# Lint tools, pinned. cfn-lint comes with the machine's Python (PyPI is out of
# reach here); Redocly CLI from the npm registry through npx, cached after the
# first run.
CFN_LINT ?= cfn-lint
REDOCLY  := @redocly/cli@2.77.0
# staticcheck from the Go module proxy, built once into the build cache by
# go run. It runs in plain module mode: the emulator's patches change only
# kumo's internals (infra/emulator/kumo/overlay.sh), so every package,
# tests included, type-checks the same without the overlay, and this lint
# proves it stays so.
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2

## lint: go.mod/go.sum tidy, staticcheck with no finding, template.yaml clean under cfn-lint (informational checks too), openapi.yaml clean under Redocly (no warning)
lint: lint-tools
	@GOFLAGS= $(GO) mod tidy -diff || { echo "go.mod/go.sum are not tidy: run 'GOFLAGS= go mod tidy'" >&2; exit 1; }
	GOFLAGS= $(GO) run $(STATICCHECK) ./...
	$(CFN_LINT) --include-checks I -- template.yaml
	REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true npx --yes $(REDOCLY) lint --config redocly.yaml openapi.yaml

lint-tools:
	@command -v $(CFN_LINT) >/dev/null || python3 -m pip install --quiet cfn-lint==1.51.0
	@command -v npx >/dev/null || { apt-get update && apt-get install -y nodejs npm; }

# What a deploy deploys, without an AWS account: every function built as
# `sam build` builds it (its build-<LogicalId> target below, run with
# ARTIFACTS_DIR in the environment, one folder per function), packaged and
# transformed by the SAM translator (samtranslator, which cfn-lint brings),
# checked (every caller invokes an alias under a gradual deployment) and
# linted. W2001 is left out of that lint only: the translator resolves the
# parameters of DeploymentPreference when it transforms (as CloudFormation
# does with the deploy's values), so they look unused after; `make lint`
# checks W2001 on template.yaml itself.
SAM_CHECK := .aws-sam/check
SAM_FUNCTIONS = $(shell sed -n 's/^build-\([A-Za-z]*\):$$/\1/p' Makefile)

## sam-check: build every function as sam build does, SAM-transform the template and lint the result (infra/sam/check.py)
sam-check: lint-tools
	rm -rf $(SAM_CHECK) && mkdir -p $(SAM_CHECK)
	@for fn in $(SAM_FUNCTIONS); do \
		echo "build-$$fn"; ARTIFACTS_DIR=$(abspath $(SAM_CHECK))/$$fn $(MAKE) --no-print-directory build-$$fn || exit 1; \
	done
	python3 infra/sam/check.py template.yaml $(SAM_CHECK) $(SAM_CHECK)/template.json
	$(CFN_LINT) --include-checks I --ignore-checks W2001 -- $(SAM_CHECK)/template.json

# Every fuzz target as package:Target. `make test` runs their seed corpora
# (f.Add and testdata/fuzz) like any test; `make fuzz` mutates each one for
# FUZZTIME and prints how many inputs ran.
FUZZTIME ?= 30s
FUZZ_TARGETS := \
	./shared/httpapi:FuzzReadObject ./shared/httpapi:FuzzQuery ./shared/httpapi:FuzzIfMatch ./shared/httpapi:FuzzRouting \
	./shared/space:FuzzRegisterInput ./shared/space:FuzzCheckManifests ./shared/dynamostore:FuzzRevisionManifests \
	./shared/auth:FuzzLocalVerifier ./shared/cursor:FuzzOpen ./shared/probing:FuzzDecodeMessage \
	./shared/provisioning:FuzzValidateTags ./infra/problemconn:FuzzAsProblem

## fuzz: run each fuzz target for FUZZTIME (default 30s): make fuzz FUZZTIME=5m
fuzz: deps
	unset KUMO_DATA_DIR && $(WITH_OVERLAY) total=0; \
	for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t##*:}; \
		out=$$($(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) -parallel 2 $$pkg 2>&1) || { echo "$$out" | grep -v ' INFO '; echo "FAIL $$t"; exit 1; }; \
		n=$$(echo "$$out" | grep -o 'execs: [0-9]*' | tail -1 | grep -o '[0-9]*'); \
		total=$$((total + $${n:-0})); echo "ok   $$t: $${n:-0} inputs, 0 crashes"; \
	done; \
	echo "fuzz: $$total inputs over $(words $(FUZZ_TARGETS)) targets, 0 crashes"

## vet: go vet with the emulator overlay
vet: deps
	$(WITH_OVERLAY) $(GO) vet ./...

## overlay: print the emulator's go.mod (use: GOFLAGS=-modfile=$$(make -s overlay) go test ./pkg)
overlay: deps
	@bash infra/emulator/kumo/overlay.sh

## token: print a bearer token for the local stack: make token ORG=acme [SCOPE=spaces:internal]
token:
	@$(GO) run ./infra/cmd/token -key $(LOCAL)/dev-jwt.pem -org "$(ORG)" -scope "$(SCOPE)"

deps:
	$(GO) mod download

## spaces: the spaces CLI into bin/spaces (docs/cli.md); ./bin/spaces completion bash > … for completion
spaces:
	GOFLAGS= $(GO) build -trimpath -o bin/spaces ./cli/cmd/spaces

## terraform-provider: the Terraform/OpenTofu provider into bin/terraform-provider-spaces (docs/cli.md#the-terraform-provider)
terraform-provider:
	GOFLAGS= $(GO) build -trimpath -o bin/terraform-provider-spaces ./terraform/cmd/terraform-provider-spaces

## generate: regenerate the Go client from openapi.yaml (client/openapi.gen.go; TestGeneratedIsCurrent fails when it is stale)
generate:
	GOFLAGS= $(GO) generate ./client

## browser: Debian's chromium and axe-core (npm, pinned, outside the repo) for the console's browser tests
AXE_VERSION := 4.11.0
AXE_DIR     := $(HOME)/.cache/spaces/axe-$(AXE_VERSION)
browser:
	@command -v chromium >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; }
	@test -f $(AXE_DIR)/node_modules/axe-core/axe.min.js || npm install --no-audit --no-fund --silent --prefix $(AXE_DIR) axe-core@$(AXE_VERSION)

## tour-tools: curl and jq, which the tours of README.md and docs/tour.md need (TestToursPastedTwice pastes them)
tour-tools:
	@command -v curl >/dev/null && command -v jq >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq curl jq; }

## kube-bins: build kube-apiserver and etcd once into a cache outside the repo
kube-bins:
	bash infra/kube/build.sh

## tofu: build OpenTofu's tofu once into the same cache, for the Terraform provider's acceptance tests (infra/tofu/README.md)
tofu:
	bash infra/tofu/build.sh

## bench: the benchmarks behind BENCHMARKS.md
bench: deps browser
	unset KUMO_DATA_DIR && $(WITH_OVERLAY) $(GO) test -run '^$$' -bench . -benchmem ./...

clean:
	rm -rf .aws-sam bin

# The agent's image, built by ko (pinned, from the Go module proxy, built
# once into the build cache by go run) without Docker into an OCI layout,
# and its manifests rendered for it (infra/cmd/agentimage says how the
# base image is made). AGENT_REPO is where you push the layout; the
# manifests name the image there by digest. SPACES_AGENT_URL is where the
# agent calls Spaces: the stack's AgentUrl output, AgentFunction's function
# URL (https, except on loopback; default the local stack's, make run).
KO              := github.com/google/ko@v0.19.1
AGENT_OUT       := $(LOCAL)/agent
AGENT_REPO      ?= registry.example/spaces-agent
AGENT_PLATFORMS ?= linux/amd64,linux/arm64
SPACES_AGENT_URL ?= http://127.0.0.1:8081
# AGENT_OPT_IN: comma-separated namespaces the agent may apply revisions in.
AGENT_OPT_IN    ?=

## agent-image: the agent's image (ko, no Docker) as an OCI layout in .local/agent/oci, and its manifests in .local/agent/spaces-agent.yaml
agent-image: deps
	GOFLAGS= $(GO) run ./infra/cmd/agentimage -out $(AGENT_OUT) -repo $(AGENT_REPO) -agent-url $(SPACES_AGENT_URL) \
		-opt-in "$(AGENT_OPT_IN)" -platforms $(AGENT_PLATFORMS) -ko $(KO)

# ---- SAM: one target per function (sam build calls these) ----
build-ApiFunction:
	$(LAMBDA_ENV) $(GO) build $(LAMBDA_FLAGS) -o $(ARTIFACTS_DIR)/bootstrap ./functions/api

build-DiscoveryFunction:
	$(LAMBDA_ENV) $(GO) build $(LAMBDA_FLAGS) -o $(ARTIFACTS_DIR)/bootstrap ./functions/discovery

build-SchedulerFunction:
	$(LAMBDA_ENV) $(GO) build $(LAMBDA_FLAGS) -o $(ARTIFACTS_DIR)/bootstrap ./functions/scheduler

build-ProberFunction:
	$(LAMBDA_ENV) $(GO) build $(LAMBDA_FLAGS) -o $(ARTIFACTS_DIR)/bootstrap ./functions/prober

build-CascadeFunction:
	$(LAMBDA_ENV) $(GO) build $(LAMBDA_FLAGS) -o $(ARTIFACTS_DIR)/bootstrap ./functions/cascade

build-WebhooksFunction:
	$(LAMBDA_ENV) $(GO) build $(LAMBDA_FLAGS) -o $(ARTIFACTS_DIR)/bootstrap ./functions/webhooks

build-AgentFunction:
	$(LAMBDA_ENV) $(GO) build $(LAMBDA_FLAGS) -o $(ARTIFACTS_DIR)/bootstrap ./functions/agent

build-PresenceFunction:
	$(LAMBDA_ENV) $(GO) build $(LAMBDA_FLAGS) -o $(ARTIFACTS_DIR)/bootstrap ./functions/presence

build-ConsoleFunction:
	$(LAMBDA_ENV) $(GO) build $(LAMBDA_FLAGS) -o $(ARTIFACTS_DIR)/bootstrap ./functions/console

build-RevisionsFunction:
	$(LAMBDA_ENV) $(GO) build $(LAMBDA_FLAGS) -o $(ARTIFACTS_DIR)/bootstrap ./functions/revisions

build-ProvisionerFunction:
	$(LAMBDA_ENV) $(GO) build $(LAMBDA_FLAGS) -o $(ARTIFACTS_DIR)/bootstrap ./functions/provisioner
