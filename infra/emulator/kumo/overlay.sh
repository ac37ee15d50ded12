#!/usr/bin/env bash
# Patches the embedded emulator (kumo) with patches/*.patch, without forking
# kumo into the repository and without touching the module cache. Each patch
# names one file of kumo (its "+++ b/<path>" line):
#   - dynamodb-streams.patch: DynamoDB stream records for TransactWriteItems
#     (Put, Update, Delete, with old and new images), as real DynamoDB emits
#     them and kumo does not; and the streams of tables restored from the
#     data folder registered again, whose stream ARNs otherwise point at
#     nothing;
#   - dynamodb-query-index.patch (a new file, query_index.go) and
#     dynamodb-query-storage.patch: Query answered from a sorted index per
#     partition key (the table's and each GSI's), in time proportional to
#     the page rather than the table, kept in order by each write (short
#     sorted blocks), so that no Query pays for the writes before it; and
#     the TTL reaper reading the items bearing the TTL attribute, kept by
#     the same writes, where it read every item of the table every 30 s
#     under the write lock, every request waiting (BENCHMARKS.md, "Web
#     console": a pass of about half a second at 100,000 spaces);
#   - dynamodb-ttl-test.patch: that reaper's test, beside kumo's own, run
#     in the patched copy by make test (Makefile, RUN_TESTS: cd to the
#     replace line's folder of the go.mod this prints, then GOFLAGS= go
#     test ./internal/service/dynamodb/);
#   - sqs-long-poll.patch: a long poll answers as soon as a message becomes
#     visible (its delay or visibility timeout over), as SQS does; kumo
#     woke only on a send, so a poll waited out its 20 s while delayed
#     probe messages fell due;
#   - storage-*.patch, kumo-durable.patch: persistence to KUMO_DATA_DIR only
#     in a process that asks for it (KUMO_PERSIST=1: the local stack, never a
#     test), and, when persisting, each answer held back until every change
#     it made is on disk, so that the local stack acknowledges a write only
#     after it is durable;
#   - streams-store.patch, dynamodb-streams-persist.patch: the tables' stream
#     records persisted with the tables (one snapshot, so a change and its
#     record are on disk together), their sequence numbers going on after a
#     restart; kumo kept streams in memory only, so a restart lost every
#     record not yet read and numbered from 1 again;
#   - sqs-inflight.patch: messages in flight persisted, so that one received
#     before a crash comes back after its visibility timeout, as in SQS;
#     kumo dropped them from the data folder at the receive
#     (TestStreamRecordsAndInFlightMessagesSurviveARestart).
#
# The patches change behaviour only, inside kumo's own (internal) packages:
# kumo's exported API is the released one, and Spaces calls nothing a patch
# adds. So every tool that runs in plain module mode (GOFLAGS= go build,
# go vet, go list, gopls, staticcheck in `make lint`) type-checks the whole
# tree, tests included, without this overlay; only running the emulator
# needs it, and an unpatched one is refused at start (emulator.Check names
# this script). Keep it so: a patch that exported something for Spaces to
# call would break those tools (the lint's plain-mode staticcheck fails).
#
# Go refuses -overlay replacements of files beneath GOMODCACHE, so this builds
# the next best thing outside the repository:
#   <cache>/kumo-overlay/<version>/kumo-<patches hash>  kumo with the patches
#   <cache>/kumo-overlay/<version>/mod-<hash>/go.mod    the repository's go.mod
#                                                       plus one replace line
#   <cache>/kumo-overlay/<version>/mod-<hash>/go.sum    the repository's go.sum
# (<cache> is $SPACES_CACHE_DIR, default ~/.cache/spaces) and prints the path of
# that go.mod, for `go -modfile=<path>`. Both folders are keyed by what they are
# made of and built under a temporary name, then renamed into place, so any
# number of checkouts may run this at once: each either finds the finished
# folder or renames its own in. Any failure exits non-zero and prints nothing
# on stdout, so a caller never gets a half-made or empty -modfile.
#
# Usage: bash infra/emulator/kumo/overlay.sh   (from anywhere in the repository)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
cd "$root"
# Building the overlay must not need the overlay.
export GOFLAGS=
mod=github.com/sivchari/kumo
version="$(go list -m -f '{{.Version}}' "$mod")"
dir="$(go list -m -f '{{.Dir}}' "$mod")"
if [[ -z "$dir" || ! -d "$dir" ]]; then
	go mod download "$mod" >&2
	dir="$(go list -m -f '{{.Dir}}' "$mod")"
fi
base="${SPACES_CACHE_DIR:-$HOME/.cache/spaces}/kumo-overlay/$version"
mkdir -p "$base"

hash() { sha256sum | cut -c1-16; }

# install TMP DEST: rename a finished temporary folder into place, or drop it
# when a concurrent run got there first.
install() {
	if ! mv -T "$1" "$2" 2>/dev/null; then
		[[ -f "$2/.complete" ]] || { echo "overlay: cannot install $2" >&2; exit 1; }
		rm -rf "$1"
	fi
}

patches=("$here"/patches/*.patch)
kumo="$base/kumo-$(cat "${patches[@]}" "$here/applypatch/main.go" | hash)"
if [[ ! -f "$kumo/.complete" ]]; then
	tmp="$(mktemp -d "$base/kumo.tmp.XXXXXX")"
	trap 'rm -rf "$tmp"' EXIT
	cp -R "$dir/." "$tmp/"
	chmod -R u+w "$tmp"
	for p in "${patches[@]}"; do
		target="$(sed -n 's#^+++ b/\([^[:space:]]*\).*#\1#p' "$p" | head -1)"
		[[ -n "$target" ]] || { echo "overlay: $p names no file (+++ b/<path>)" >&2; exit 1; }
		# Patches apply in name order, each to the file as the earlier ones
		# left it; a patch "from /dev/null" creates its file.
		in="$tmp/$target"
		[[ -f "$in" ]] || in=/dev/null
		go run ./infra/emulator/kumo/applypatch -patch "$p" -in "$in" -out "$tmp/$target" >&2
	done
	touch "$tmp/.complete"
	install "$tmp" "$kumo"
	trap - EXIT
fi

moddir="$base/mod-$(cat go.mod go.sum <(echo "$kumo") | hash)"
if [[ ! -f "$moddir/.complete" ]]; then
	tmp="$(mktemp -d "$base/mod.tmp.XXXXXX")"
	trap 'rm -rf "$tmp"' EXIT
	cp go.mod "$tmp/go.mod"
	cp go.sum "$tmp/go.sum"
	printf '\n// Added by infra/emulator/kumo/overlay.sh: kumo with the patches of infra/emulator/kumo/patches.\nreplace %s %s => %s\n' "$mod" "$version" "$kumo" >>"$tmp/go.mod"
	touch "$tmp/.complete"
	install "$tmp" "$moddir"
	trap - EXIT
fi
# Folders of older go.mod versions: a week unused is long enough.
find "$base" -mindepth 1 -maxdepth 1 -name 'mod-*' -mtime +7 -exec rm -rf {} + 2>/dev/null || true
touch "$moddir"
echo "$moddir/go.mod"
