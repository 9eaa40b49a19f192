#!/usr/bin/env bash
# make accuracy: build the workload suite to IR, run the exact-count oracle on each, sample
# each under profd and score the samples against the exact counts (docs/accuracy.md).
# Results: out/accuracy/NAME.json (exact profile), NAME.reestimate.json (reestimate input),
# NAME.run/ (callgrind.out.PID and the jitdump), sampled/NAME.profd (profd's capture) and
# table.md (the scores). WORKLOADS="sieve fft" picks some. SIZE=native (default) runs the
# oracle at each workload's native size, the size profd samples (~1 min of callgrind each);
# SIZE=small at the oracle size (seconds each; block shares then differ from the sampled
# run's where the size changes the program's shape). Sampling needs root.
# PARTS=4 (make accuracy-merge) samples each workload in a run split into 4 parts instead
# (scripts/sample.sh), into split/NAME.profd and split/NAME.parts/, and scores each part
# repaired alone, the parts merged then repaired, and the whole run, into merge-table.md.
set -euo pipefail
cd "$(dirname "$0")/.."
out=out/accuracy
mkdir -p "$out/ir" bin
go build -o bin/ ./cmd/profd ./tools/cmd/oracle ./tools/cmd/accuracy
declare -A native=([sort]="2000000 8" [sieve]="20000000 12" [recurse]="42" [matmul]="900 6"
	[fft]="20 8" [hash]="1500000" [interp]="800000" [chase]="2000000 4")
workloads=${WORKLOADS:-"sort sieve recurse matmul fft hash interp chase"}
size=${SIZE:-native}
for w in $workloads; do
	clang-14 -O2 -g -fdebug-info-for-profiling -S -emit-llvm "workloads/$w.c" -o "$out/ir/$w.ll"
done
for w in $workloads; do
	rm -rf "$out/$w.run"
	args=()
	[ "$size" = native ] && read -ra args <<<"${native[$w]}"
	# callgrind is CPU-heavy and the machines are shared: run it niced.
	nice -n 10 bin/oracle -ir "$out/ir/$w.ll" -name "$w" -o "$out/$w.json" \
		-reestimate-json "$out/$w.reestimate.json" -- "${args[@]}" >/dev/null
done
if [ "$(id -u)" -ne 0 ]; then
	echo "make accuracy: exact profiles done; sampling under profd needs root, skipped" >&2
	exit 0
fi
if [ "${PARTS:-0}" -gt 0 ]; then
	for w in $workloads; do
		# shellcheck disable=SC2086
		PARTS=$PARTS scripts/sample.sh "$w" "$out/ir/$w.ll" "$out/split" ${native[$w]}
	done
	# shellcheck disable=SC2086
	bin/accuracy -exact "$out" -sampled "$out/split" -parts -v $workloads | tee "$out/merge-table.md"
	exit 0
fi
for w in $workloads; do
	# shellcheck disable=SC2086
	scripts/sample.sh "$w" "$out/ir/$w.ll" "$out/sampled" ${native[$w]}
done
# shellcheck disable=SC2086
bin/accuracy -exact "$out" -sampled "$out/sampled" -profi "$out/ir" -v $workloads | tee "$out/table.md"
