#!/usr/bin/env bash
# Runs the performance benchmarks of each component (reestimator, symbols, sampler, output
# formats, daemon), one package at a time, and prints their figures; run it on a quiet machine
# (nothing else running). `make bench-report`; several minutes. The target-slowdown comparison
# with perf record is separate: `make bench-overhead`.
set -euo pipefail
cd "$(dirname "$0")/.."
run() {
	echo "== go test -run '^\$' -benchmem $*"
	go test -run '^$' -benchmem "$@" | grep -E '^(Benchmark|ok|FAIL|---)' || true
}
# reestimator: min-cost-flow solvers and Repair, CFG recovery, accuracy on simulated samples
run -bench 'Solvers|Repair' -benchtime 5x ./reestimate
run -bench 'Solve$|Solve/|SolveSparse' -benchtime 5x ./reestimate/mcf
run -bench 'BuildCFG' ./reestimate/cfg
run -bench 'Accuracy' -benchtime 1x ./tools/sim
# symbols: JIT symbol map look-ups and decoding, the FIFO transport
run -bench 'MapLookup|PageIndexBuild|JitdumpDecode|PerfMapDecode' ./jitmap
run -bench 'FIFORead' ./symsource/fifo
# native symbols: a look-up in a file already read, a big file read on first sight, the drain's
# cost per count in native code
run -bench 'Lookup|ColdFile' ./internal/elfsym
run -bench 'AggregateNative' ./attribute
# sampler: sample decoding, the sampler's CPU per sample, the BPF drain, and the daemon's CPU
# while it samples against perf record's
run -bench 'DecodeAggregate' ./sampler
run -bench 'DaemonCPU' -benchtime 20x ./sampler
run -bench 'Drain100k' -benchtime 10x ./bpf
run -bench 'DaemonVsPerf' -benchtime 3x ./daemon
# output formats: LLVM sample profiles and captures
run -bench 'WriteText|WriteExtBinary|CaptureWrite|CaptureRead' -benchtime 10x ./profileio
# daemon: CPU per sample and memory per symbol of the profd binary, the flush
run -bench 'DaemonCPUPerSamples|RSS100kSymbols' -benchtime 1x ./cmd/profd
run -bench 'Flush10kFunctions' -benchtime 3x ./daemon
