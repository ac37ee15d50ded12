#!/usr/bin/env bash
# Patches the embedded emulator (kumo) with streams.patch, without forking
# kumo into the repository and without touching the module cache. The patch
# (against internal/service/dynamodb/storage.go) makes kumo
#   - emit DynamoDB stream records for TransactWriteItems (Put, Update,
#     Delete, with old and new images), as real DynamoDB does; kumo emits
#     them for PutItem/UpdateItem/DeleteItem only, and registration and
#     deregistration are transactions;
#   - register the streams of tables restored from its data folder (make
#     run persists), whose stream ARNs otherwise point at nothing.
#
# Go refuses -overlay replacements of files beneath GOMODCACHE, so this builds
# the next best thing outside the repository, keyed by kumo's version:
#   ~/.cache/spaces/kumo-overlay/<version>/kumo     a copy of the module with
#                                                   streams.patch applied
#   ~/.cache/spaces/kumo-overlay/<version>/go.mod   the repository's go.mod plus
#                                                   one replace line pointing at it
#   ~/.cache/spaces/kumo-overlay/<version>/go.sum   the repository's go.sum
# and prints the path of that go.mod, for `go -modfile=<path>` (the Makefile
# passes it to vet, test, run and bench). go.mod and go.sum are copied afresh
# on every run so they follow the repository's.
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
	go mod download "$mod"
	dir="$(go list -m -f '{{.Dir}}' "$mod")"
fi
rel=internal/service/dynamodb/storage.go
patch="$here/streams.patch"
cache="${SPACES_CACHE:-$HOME/.cache/spaces}/kumo-overlay/$version"
stamp="$cache/patch.sha256"
sum="$(cat "$patch" "$dir/$rel" "$here/applypatch/main.go" | sha256sum | cut -d' ' -f1)"
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$sum" ]]; then
	rm -rf "$cache/kumo" "$cache/kumo.tmp" "$stamp"
	mkdir -p "$cache"
	cp -R "$dir" "$cache/kumo.tmp"
	chmod -R u+w "$cache/kumo.tmp"
	go run ./infra/emulator/kumo/applypatch -patch "$patch" -in "$dir/$rel" -out "$cache/kumo.tmp/$rel"
	mv "$cache/kumo.tmp" "$cache/kumo"
	echo "$sum" >"$stamp"
fi
cp go.mod "$cache/go.mod.tmp"
printf '\n// Added by infra/emulator/kumo/overlay.sh: kumo with transaction stream records.\nreplace %s %s => %s\n' "$mod" "$version" "$cache/kumo" >>"$cache/go.mod.tmp"
cp go.sum "$cache/go.sum"
mv "$cache/go.mod.tmp" "$cache/go.mod"
echo "$cache/go.mod"
