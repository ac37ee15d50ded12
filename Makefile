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

.PHONY: run test token deps kube-bins browser vet bench build clean overlay
.DEFAULT_GOAL := run

## run: the whole service locally (embedded AWS emulator, API on 127.0.0.1:8080)
run: deps
	@mkdir -p $(KUMO_DATA_DIR)
	$(WITH_OVERLAY) KUMO_DATA_DIR=$(KUMO_DATA_DIR) $(GO) run ./infra/cmd/local

## test: every test, after installing what they need (modules, kube-apiserver + etcd, chromium)
test: deps kube-bins browser
	unset KUMO_DATA_DIR && $(WITH_OVERLAY) $(GO) vet ./... && $(GO) test -count=1 -timeout 20m ./...

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

## browser: Debian's chromium and axe-core (npm, pinned, outside the repo) for the console's browser tests
AXE_VERSION := 4.11.0
AXE_DIR     := $(HOME)/.cache/spaces/axe-$(AXE_VERSION)
browser:
	@command -v chromium >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; }
	@test -f $(AXE_DIR)/node_modules/axe-core/axe.min.js || npm install --no-audit --no-fund --silent --prefix $(AXE_DIR) axe-core@$(AXE_VERSION)

## kube-bins: build kube-apiserver and etcd once into a cache outside the repo
kube-bins:
	bash infra/kube/build.sh

## bench: the benchmarks behind BENCHMARKS.md
bench: deps browser
	unset KUMO_DATA_DIR && $(WITH_OVERLAY) $(GO) test -run '^$$' -bench . -benchmem ./...

clean:
	rm -rf .aws-sam bin

# ---- SAM: one target per function (sam build calls these) ----
build-ApiFunction:
	$(LAMBDA_ENV) $(GO) build $(LAMBDA_FLAGS) -o $(ARTIFACTS_DIR)/bootstrap ./functions/api

build-SchedulerFunction:
	$(LAMBDA_ENV) $(GO) build $(LAMBDA_FLAGS) -o $(ARTIFACTS_DIR)/bootstrap ./functions/scheduler

build-ProberFunction:
	$(LAMBDA_ENV) $(GO) build $(LAMBDA_FLAGS) -o $(ARTIFACTS_DIR)/bootstrap ./functions/prober

build-CascadeFunction:
	$(LAMBDA_ENV) $(GO) build $(LAMBDA_FLAGS) -o $(ARTIFACTS_DIR)/bootstrap ./functions/cascade

build-ConsoleFunction:
	$(LAMBDA_ENV) $(GO) build $(LAMBDA_FLAGS) -o $(ARTIFACTS_DIR)/bootstrap ./functions/console

build-RevisionsFunction:
	$(LAMBDA_ENV) $(GO) build $(LAMBDA_FLAGS) -o $(ARTIFACTS_DIR)/bootstrap ./functions/revisions
