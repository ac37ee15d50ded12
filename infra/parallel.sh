#!/usr/bin/env bash
# parallel.sh CMD... runs every CMD (a shell command line) at once, prints
# each one's output whole, in the order given, and fails if any failed.
# make test runs its `go test` runs through it (Makefile, "test").
set -uo pipefail
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
pids=()
for i in $(seq 1 $#); do
	bash -c "${!i}" >"$dir/$i.log" 2>&1 &
	pids+=($!)
done
failed=0
for i in $(seq 1 $#); do
	if ! wait "${pids[$((i - 1))]}"; then
		failed=1
		echo "FAILED: ${!i}" >>"$dir/$i.log"
	fi
	cat "$dir/$i.log"
done
exit $failed
