#!/usr/bin/env bash
# Runs every native Go fuzz target in the module for the given time each (default 30s).
#
# A target that ends with a bare "context deadline exceeded" and writes no failing input hit
# a race of Go's fuzzing coordinator at the end of -fuzztime (go.dev/issue/75804, fixed in
# Go 1.27), not a finding: its corpus is run again without fuzzing, and only a failure
# there fails the run.
set -euo pipefail
fuzztime=${1:-30s}
status=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for pkg in $(go list ./...); do
	for target in $(go test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true); do
		echo "== $pkg $target ($fuzztime)"
		if go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg" 2>&1 | tee "$log"; then
			continue
		fi
		# A finding writes its input, panics or fails the target's own run (an indented FAIL).
		if grep -q 'context deadline exceeded' "$log" && ! grep -qE 'Failing input written|panic:|^\s+--- FAIL' "$log"; then
			echo "== $target: the fuzzing coordinator's deadline race, no finding; its corpus again:"
			if go test -count=1 -run "^${target}\$" "$pkg"; then
				continue
			fi
		fi
		status=1
	done
done
exit $status
