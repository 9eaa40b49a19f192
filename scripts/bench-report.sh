#!/usr/bin/env bash
# Runs the benchmarks the issues name, one package at a time, and prints their figures; run
# it on a quiet machine (nothing else running). `make bench-report`; several minutes. The
# target-slowdown comparison with perf record is separate: `make bench-overhead`.
set -euo pipefail
cd "$(dirname "$0")/.."
run() {
	echo "== go test -run '^\$' -benchmem $*"
	go test -run '^$' -benchmem "$@" | grep -E '^(Benchmark|ok|FAIL|---)' || true
}
# reestimate (issue 2): solvers, CFG recovery, simulator accuracy
run -bench 'Solvers|Solve$|Solve/|SolveSparse|Repair' -benchtime 5x ./reestimate
run -bench 'BuildCFG' ./reestimate
run -bench 'Accuracy' -benchtime 1x ./reestimate/sim
# symbol bridge (issue 3)
run -bench 'MapLookup|PageIndexBuild|JitdumpDecode|PerfMapDecode' ./jitmap
run -bench 'FIFORead' ./symsource/fifo
# sampler (issue 4)
run -bench 'DecodeAggregate' ./sampler
run -bench 'DaemonCPU' -benchtime 20x ./sampler
run -bench 'Drain100k' -benchtime 10x ./bpf
run -bench 'DaemonVsPerf' -benchtime 3x ./daemon
# profileio (issue 5)
run -bench 'WriteText|WriteExtBinary|CaptureWrite|CaptureRead' -benchtime 10x ./profileio
# daemon (issue 6)
run -bench 'DaemonCPUPerSamples|RSS100kSymbols' -benchtime 1x ./cmd/profd
run -bench 'Flush10kFunctions' -benchtime 3x ./daemon
