# profd — see README.md. `make demo` runs the main job, `make test` runs the tests.
SHELL := /bin/bash
GO ?= go
FUZZTIME ?= 30s
BENCH ?= .
BENCHTIME ?= 1s
BENCHPKGS ?= ./...
TESTTIMEOUT ?= 15m

# The re-optimising JIT example (examples/reopt) is C++ on LLVM 14's ORC.
LLVM_CONFIG ?= llvm-config-14
CXX_REOPT ?= clang++-14

.PHONY: all build tools reopt reopt-demo test test-race deps vet fmt-check lint bench bench-report bench-overhead bench-all-host soak soak-churn soak-export soak-export-down host-trial fuzz generate generate-check demo accuracy accuracy-merge pgo-demo clean

all: build

# VERSION is what profd --version names, with the commit the build records.
VERSION ?= $(shell git describe --always --dirty 2>/dev/null)

## build: compile every command of profd into bin/ (VERSION=v1.2.3 overrides git describe)
build:
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o bin/ ./cmd/...

## tools: compile the accuracy tools (tools/cmd: bin/oracle, bin/accuracy) into bin/
tools:
	$(GO) build -o bin/ ./tools/cmd/...

## reopt: bin/reopt, the re-optimising JIT that reads its profile back from profd (examples/reopt)
reopt: bin/reopt

bin/reopt: examples/reopt/reopt.cpp jit/profd_jit.h | deps
	@mkdir -p bin
	$(CXX_REOPT) -O2 $$($(LLVM_CONFIG) --cxxflags) -Ijit $< -o $@ $$($(LLVM_CONFIG) --ldflags --libs)

## deps: check (and as root, install with apt) the tools the tests and the demo use
deps:
	@scripts/deps.sh

## test: vet, gofmt check and every test (the README's test command; .ci/run calls it). The
##   fork storm runs on its own after the rest: it measures how many of 500 short-lived
##   processes profd adds and samples, which other packages' tests, forking processes of their
##   own on both cores, would measure instead. So does the test that takes a CPU offline and
##   back (every other test's events on that CPU would go with it). Then the daemon's tests of
##   its goroutines together (RACETESTS) run again under the race detector (a minute, most of
##   it building).
RACETESTS ?= ^(Test[A-Za-z]*Concurrent|TestAllShortLivedRegisteredJIT|TestFlushRequests|TestIntervals)$$
test: deps vet fmt-check generate-check
	$(GO) test -count=1 -timeout $(TESTTIMEOUT) -skip '^(TestForkStorm|TestCPUOfflineAndBack)$$' ./...
	$(GO) test -count=1 -timeout $(TESTTIMEOUT) -run '^TestForkStorm$$' ./daemon
	$(GO) test -p 1 -count=1 -timeout $(TESTTIMEOUT) -run '^TestCPUOfflineAndBack$$' ./sampler ./internal/execmaps
	$(GO) test -race -count=1 -timeout $(TESTTIMEOUT) -run '$(RACETESTS)' ./daemon ./jitmap

## test-race: every test under the race detector (slower; not in `make test`)
test-race: deps
	$(GO) test -race -count=1 -timeout 30m ./...

vet:
	$(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt: these files need formatting:"; echo "$$out"; exit 1; fi

## lint: vet, gofmt and staticcheck (fetched through the Go module proxy)
lint: vet fmt-check
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...

## bench: benchmarks with allocation figures (BENCH=regexp BENCHPKGS=./pkg BENCHTIME=2s)
bench: deps
	$(GO) test -run '^$$' -bench '$(BENCH)' -benchmem -benchtime $(BENCHTIME) $(BENCHPKGS)

## bench-report: the performance benchmarks of each component, package by package (quiet machine; minutes)
bench-report: deps
	@scripts/bench-report.sh

## bench-overhead: lli-14 slowdown under profd (BPF, ring) vs perf record at 999 Hz and 4 kHz,
##   spinning, saturated and blocking (relay) targets
##   (interleaved runs, medians; PROFD_BENCH_RUNS=10 PROFD_BENCH_CHUNKS=4000; minutes of CPU)
bench-overhead: deps
	PROFD_BENCH_OVERHEAD=1 $(GO) test -run '^$$' -bench TargetSlowdown -benchtime 1x -timeout 60m ./sampler

## bench-all-host: --all against --pid over 200 processes (50 JITs) at 99 and 999 Hz: profd's CPU
##   per 1000 samples and RSS, and perf record -a -g's CPU (PROFD_ALLHOST_PROCS=200
##   PROFD_ALLHOST_JITS=50 PROFD_BENCH_SECONDS=5 PROFD_ALLHOST_WARMUP=1;
##   PROFD_ALLHOST_RUNTIMES=1: node, java and lli-14 as the JITs; minutes)
bench-all-host: deps
	PROFD_BENCH_ALLHOST=1 $(GO) test -run '^$$' -bench '^BenchmarkAllHost$$' -benchtime 1x -timeout 30m ./daemon

## soak: an hour of short-lived JITs and frequent flushes compressed into SOAKTIME (default 3m):
##   profd's RSS and fds must stay flat and every JIT must get its final profile (not in `make test`)
SOAKTIME ?= 3m
soak: deps
	PROFD_SOAK=1 PROFD_SOAK_DURATION=$(SOAKTIME) $(GO) test -count=1 -run '^TestSoak$$' -v -timeout 60m ./cmd/profd

## soak-churn: a JIT that keeps loading and unloading code (about 8 000 records a second) beside
##   one that asks for its profiles every round, flushes every 3 s, for CHURNTIME (default 10m):
##   each later minute's median RSS within 10 % of the second minute's, every flush at most 1 s, every
##   request answered within 5 s
CHURNTIME ?= 10m
soak-churn: deps
	PROFD_SOAK_CHURN=1 PROFD_SOAK_DURATION=$(CHURNTIME) $(GO) test -count=1 -run '^TestSoakChurn$$' -v -timeout 60m ./cmd/profd

## soak-export: two profd on one node target for EXPORTTIME (default 10m), one exporting every
##   10 s interval to a real Collector: its CPU at most 20 % and its RSS at most 10 % above the
##   other's, every interval delivered; logs the end-to-delivery latency
EXPORTTIME ?= 10m
soak-export: deps
	PROFD_SOAK_EXPORT=1 PROFD_SOAK_DURATION=$(EXPORTTIME) $(GO) test -count=1 -run '^TestSoakExport$$' -v -timeout 60m ./cmd/profd

## soak-export-down: profd exporting to an OTLP endpoint nothing listens at for EXPORTTIME (default
##   10m): RSS within --otlp-queue-mb 8 + 64 MB, one warning, sampling unaffected (not in `make test`)
soak-export-down: deps
	PROFD_SOAK_EXPORT_DOWN=1 PROFD_SOAK_DURATION=$(EXPORTTIME) $(GO) test -count=1 -run '^TestExportNoCollector$$' -v -timeout 60m ./cmd/profd

## host-trial: profd --all for HOSTTIME (default 3m) beside node, a JVM, Erlang and a shell
##   loop at once; prints profd's CPU, RSS and peak live heap, its stop time and what it named
HOSTTIME ?= 3m
host-trial: deps build
	scripts/host-trial.sh $(HOSTTIME)

## fuzz: run every Fuzz target for FUZZTIME each (long runs: FUZZTIME=10m)
fuzz:
	@scripts/fuzz.sh $(FUZZTIME)

## generate: regenerate committed generated code (bpf2go output) with the pinned clang
generate: deps
	$(GO) generate ./...

## generate-check: fail when committed generated code is not what `make generate` makes
generate-check:
	@scripts/generate-check.sh

## demo: the main job (see README.md)
demo: deps build
	@scripts/demo.sh

## accuracy: exact counts of the workload suite (callgrind oracle), profd's samples of it and
##   their block/edge overlap (SIZE=small for a quick oracle; root; ~10 min)
accuracy: deps
	@scripts/accuracy.sh

## accuracy-merge: as accuracy, each workload's profd run split into PARTS (default 4) interval
##   captures of equal CPU time: the parts repaired alone, merged (capmerge) then repaired, and
##   the whole run's capture, scored (out/accuracy/merge-table.md; SIZE=small; root)
PARTS ?= 4
accuracy-merge: deps
	@PARTS=$(PARTS) scripts/accuracy.sh

## pgo-demo: -O2 vs instrumentation PGO vs profd's sample profiles, timed (root; a few minutes)
pgo-demo: deps build
	@scripts/pgo-demo.sh

## reopt-demo: a JIT re-optimising with profd's profile in-process, against the same JIT
##   re-optimising without one and against instrumentation PGO run in the same JIT (root; minutes)
reopt-demo: deps build reopt
	@scripts/reopt-demo.sh

clean:
	rm -rf bin out
