#!/usr/bin/env bash
# Runs every native Go fuzz target in the module for the given time each (default 30s).
set -euo pipefail
fuzztime=${1:-30s}
status=0
for pkg in $(go list ./...); do
	for target in $(go test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true); do
		echo "== $pkg $target ($fuzztime)"
		go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg" || status=1
	done
done
exit $status
