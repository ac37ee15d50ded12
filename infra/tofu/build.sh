#!/usr/bin/env bash
# Builds a real OpenTofu CLI (`tofu`) from its module source, once, into a
# cache folder outside the repository keyed by the version, for the Terraform
# provider's acceptance tests (terraform/acc_test.go). Idempotent: when the
# binary is there and `tofu version` names the pinned version, it prints
# where and exits at once. See infra/tofu/README.md.
#
# Why not `go install github.com/opentofu/opentofu/cmd/tofu@version`: the
# opentofu module replaces hashicorp/hcl with its fork in its go.mod, and go
# install refuses a module with replace directives. So the module's source is
# downloaded through the Go module proxy (go mod download) and built inside
# it as its own main module, where its replace applies, as upstream builds it.
#
# Environment:
#   SPACES_TOFU_BIN_DIR  put the binary here (default: see below)
#   SPACES_CACHE_DIR     cache root (default: $HOME/.cache/spaces); the binary
#                        goes to $SPACES_CACHE_DIR/tofu/<version>/tofu
#   TOFU_BUILD_PARALLEL  go build -p value (default: the number of cores, as go
#                        build; tofu needs far less memory than kube-apiserver)
set -euo pipefail

# The pinned version: here and nowhere else (terraform/acc_test.go finds
# the binary through this script's output or SPACES_TOFU).
tofu_version="v1.12.6"

bin_dir="${SPACES_TOFU_BIN_DIR:-${SPACES_CACHE_DIR:-$HOME/.cache/spaces}/tofu/$tofu_version}"
tofu="$bin_dir/tofu"

# up_to_date: the binary exists and reports the pinned version.
up_to_date() {
	[[ -x "$tofu" ]] || return 1
	# No -q (see infra/kube/build.sh): grep reads to the end under pipefail.
	"$tofu" version 2>/dev/null | grep -x "OpenTofu ${tofu_version}" >/dev/null || return 1
}

report() { echo "tofu: $tofu"; }

if up_to_date; then
	echo "tofu $tofu_version is already built in $bin_dir"
	report
	exit 0
fi

mkdir -p "$bin_dir"
# One build at a time per folder: a second caller waits, then finds the binary.
if command -v flock >/dev/null 2>&1; then
	exec 9>"$bin_dir/.build.lock"
	flock 9
	if up_to_date; then
		echo "tofu $tofu_version was built by another run in $bin_dir"
		report
		exit 0
	fi
fi

if ! command -v go >/dev/null 2>&1; then
	echo "build.sh: 'go' is not on PATH" >&2
	exit 1
fi

echo "building tofu $tofu_version into $bin_dir (first time only, many minutes)"
tmp="$(mktemp -d "$bin_dir/.build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

export CGO_ENABLED=0
# Only the module flags we set: a caller's GOFLAGS (the emulator's -modfile)
# names another module's go.mod. GOWORK=off: no workspace around the source.
export GOFLAGS="-mod=readonly -buildvcs=false" GOWORK=off
parallel="${TOFU_BUILD_PARALLEL:-$(nproc)}"

start=$SECONDS
echo "[$((SECONDS - start))s] go mod download github.com/opentofu/opentofu@$tofu_version"
src="$(cd "$tmp" && go mod download -json "github.com/opentofu/opentofu@$tofu_version" |
	sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')"
if [[ ! -f "$src/go.mod" ]]; then
	echo "build.sh: go mod download gave no source folder for opentofu $tofu_version (got '$src')" >&2
	exit 1
fi
# The module cache is read-only and shared: the build writes only to -o.
echo "[$((SECONDS - start))s] go build -p $parallel ./cmd/tofu in $src (downloads its modules on first use)"
# version.dev=no is what OpenTofu's release build sets: without it the
# binary calls itself v1.12.6-dev.
(cd "$src" && go build -p "$parallel" -trimpath \
	-ldflags "-s -w -X 'github.com/opentofu/opentofu/version.dev=no'" -o "$tmp/tofu" ./cmd/tofu)
echo "[$((SECONDS - start))s] built"

"$tmp/tofu" version
# Same file system: the rename is atomic, so a reader never sees half a binary.
mv -f "$tmp/tofu" "$tofu"

if ! up_to_date; then
	echo "build.sh: the built binary does not report OpenTofu $tofu_version" >&2
	"$tofu" version >&2 || true
	exit 1
fi
report
