#!/usr/bin/env bash
# make accuracy: build the workload suite to IR and run the exact-count oracle on each.
# Results: out/accuracy/NAME.json (exact profile), NAME.reestimate.json (reestimate input),
# NAME.run/ (callgrind.out.PID and the jitdump). WORKLOADS="sieve fft" picks some.
set -euo pipefail
cd "$(dirname "$0")/.."
out=out/accuracy
mkdir -p "$out/ir" bin
go build -o bin/oracle ./cmd/oracle
workloads=${WORKLOADS:-"sort sieve recurse matmul fft hash interp chase"}
for w in $workloads; do
	clang-14 -O2 -g -fdebug-info-for-profiling -S -emit-llvm "workloads/$w.c" -o "$out/ir/$w.ll"
done
for w in $workloads; do
	rm -rf "$out/$w.run"
	# callgrind is CPU-heavy and the machines are shared: run it niced.
	nice -n 10 bin/oracle -ir "$out/ir/$w.ll" -name "$w" -o "$out/$w.json" \
		-reestimate-json "$out/$w.reestimate.json" >/dev/null
done
