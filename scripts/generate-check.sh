#!/usr/bin/env bash
# Fails when committed generated files differ from what `make generate` produces.
set -euo pipefail
if ! make -s generate >/dev/null; then
	# bpf2go removes its outputs before compiling: put the committed ones back.
	git checkout -- $(git ls-files -- '*_bpfel.*' '*_bpfeb.*')
	echo "generate-check: 'make generate' failed (above); the committed generated files are restored" >&2
	exit 1
fi
if ! git diff --quiet --exit-code -- '*.go' '*.o'; then
	echo "generate-check: generated files are stale; run 'make generate' and commit:" >&2
	git diff --stat -- '*.go' '*.o' >&2
	exit 1
fi
