#!/usr/bin/env bash
# Builds a real kube-apiserver and etcd from the Go module proxy, once, into a
# cache folder outside the repository keyed by the Kubernetes version, for the
# end-to-end tests (infra/kubetest). Idempotent: when both binaries are already
# there and answer --version with the pinned versions, it prints where and
# exits at once. See infra/kube/README.md.
#
# Environment:
#   SPACES_KUBE_BIN_DIR  put the binaries here (default: see below)
#   SPACES_CACHE_DIR     cache root (default: $HOME/.cache/spaces); binaries go
#                        to $SPACES_CACHE_DIR/kube/<kubernetes version>/
#   KUBE_GIT_COMMIT      commit to stamp into kube-apiserver's /version (the
#                        module proxy does not tell it; default: empty)
#   ETCD_GIT_SHA         commit to stamp into etcd --version (default: upstream's)
#   KUBE_BUILD_PARALLEL  go build -p value (default 1: the apiserver build
#                        needs ~2.5 GB of memory with one package at a time)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
kube_mod="$here/build"
etcd_mod="$here/build/etcd"

# The pinned versions live in the build modules' go.mod files, nowhere else.
mod_version() { # <go.mod> <module path>
	awk -v m="$2" '($1 == m || ($1 == "require" && $2 == m)) { print $NF; exit }' "$1"
}
kube_version="$(mod_version "$kube_mod/go.mod" k8s.io/kubernetes)"
etcd_version="$(mod_version "$etcd_mod/go.mod" go.etcd.io/etcd/server/v3)"
if [[ ! "$kube_version" =~ ^v([0-9]+)\.([0-9]+)\.[0-9]+$ ]]; then
	echo "build.sh: cannot read the k8s.io/kubernetes version from $kube_mod/go.mod (got '$kube_version')" >&2
	exit 1
fi
kube_major="${BASH_REMATCH[1]}"
kube_minor="${BASH_REMATCH[2]}"
if [[ ! "$etcd_version" =~ ^v3\.[0-9]+\.[0-9]+$ ]]; then
	echo "build.sh: cannot read the go.etcd.io/etcd/server/v3 version from $etcd_mod/go.mod (got '$etcd_version')" >&2
	exit 1
fi

bin_dir="${SPACES_KUBE_BIN_DIR:-${SPACES_CACHE_DIR:-$HOME/.cache/spaces}/kube/$kube_version}"
apiserver="$bin_dir/kube-apiserver"
etcd="$bin_dir/etcd"

# up_to_date: both binaries exist and report the pinned versions.
up_to_date() {
	# grep reads to the end (no -q): with pipefail, -q can leave etcd writing
	# its later lines into a closed pipe, and SIGPIPE would read as "outdated".
	[[ -x "$apiserver" && -x "$etcd" ]] || return 1
	"$apiserver" --version 2>/dev/null | grep -x "Kubernetes $kube_version" >/dev/null || return 1
	"$etcd" --version 2>/dev/null | grep -x "etcd Version: ${etcd_version#v}" >/dev/null || return 1
}

report() {
	echo "kube-apiserver: $apiserver"
	echo "etcd:           $etcd"
}

if up_to_date; then
	echo "kube-apiserver $kube_version and etcd $etcd_version are already built in $bin_dir"
	report
	exit 0
fi

mkdir -p "$bin_dir"
# One build at a time per folder: a second caller waits, then finds the binaries.
if command -v flock >/dev/null 2>&1; then
	exec 9>"$bin_dir/.build.lock"
	flock 9
	if up_to_date; then
		echo "kube-apiserver $kube_version and etcd $etcd_version were built by another run in $bin_dir"
		report
		exit 0
	fi
fi

if ! command -v go >/dev/null 2>&1; then
	echo "build.sh: 'go' is not on PATH; install Go (>= the go line of $kube_mod/go.mod)" >&2
	exit 1
fi

echo "building kube-apiserver $kube_version and etcd $etcd_version into $bin_dir (first time only, ~15 min)"

tmp="$(mktemp -d "$bin_dir/.build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

export CGO_ENABLED=0
# Only the module flags we set: a caller's GOFLAGS could carry -mod=vendor etc.
export GOFLAGS="-mod=readonly -buildvcs=false"
parallel="${KUBE_BUILD_PARALLEL:-1}"

build_date="$(date ${SOURCE_DATE_EPOCH:+--date=@$SOURCE_DATE_EPOCH} -u +'%Y-%m-%dT%H:%M:%SZ')"
# What kubernetes' hack/lib/version.sh stamps, on both version packages.
# gitTreeState "archive" is upstream's value for a build from a source archive
# without git: the module proxy's zip is exactly that.
kube_ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	kube_ldflags+=" -X '$pkg.gitVersion=$kube_version'"
	kube_ldflags+=" -X '$pkg.gitMajor=$kube_major'"
	kube_ldflags+=" -X '$pkg.gitMinor=$kube_minor'"
	kube_ldflags+=" -X '$pkg.gitCommit=${KUBE_GIT_COMMIT:-}'"
	kube_ldflags+=" -X '$pkg.gitTreeState=archive'"
	kube_ldflags+=" -X '$pkg.buildDate=$build_date'"
done
etcd_ldflags="-s -w"
if [[ -n "${ETCD_GIT_SHA:-}" ]]; then
	etcd_ldflags+=" -X 'go.etcd.io/etcd/api/v3/version.GitSHA=$ETCD_GIT_SHA'"
fi

start=$SECONDS
echo "[$((SECONDS - start))s] etcd $etcd_version: go build (downloads modules through \$GOPROXY on first use)"
(cd "$etcd_mod" && go build -p "$parallel" -trimpath -ldflags "$etcd_ldflags" -o "$tmp/etcd" .)
echo "[$((SECONDS - start))s] kube-apiserver $kube_version: go build -p $parallel (the long part)"
(cd "$kube_mod" && go build -p "$parallel" -trimpath -ldflags "$kube_ldflags" -o "$tmp/kube-apiserver" ./kube-apiserver)
echo "[$((SECONDS - start))s] built"

"$tmp/kube-apiserver" --version
"$tmp/etcd" --version

# Same file system: each rename is atomic, so a reader never sees half a binary.
mv -f "$tmp/etcd" "$etcd"
mv -f "$tmp/kube-apiserver" "$apiserver"

if ! up_to_date; then
	echo "build.sh: the built binaries do not report $kube_version / ${etcd_version#v}" >&2
	exit 1
fi
report
