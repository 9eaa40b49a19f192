#!/usr/bin/env bash
# make pgo-demo: the profile-guided loop closed (docs/accuracy.md). For each workload
# (WORKLOADS, default "hash interp"), at its native size:
#   base            clang-14 -O2
#   instr           instrumentation PGO: -fprofile-instr-generate, run, llvm-profdata-14 merge,
#                   -fprofile-instr-use
#   sample-raw      -fprofile-sample-use with profd's profile of the program run by lli-14,
#                   raw samples per line (reestimate --raw)
#   sample-repaired the same capture reestimated (reestimate, the default)
# then times the four builds in interleaved rounds (RUNS, default 7) under
# flock /tmp/profd-bench.lock and prints each build's median user CPU time (less disturbed
# than wall time on a shared machine) as a ratio to base, and the share of instrumentation
# PGO's gain each profd profile recovers. Needs root (profd samples).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" -ne 0 ]; then
	echo "make pgo-demo: profd samples other processes and needs root; run it as root" >&2
	exit 1
fi
declare -A native=([sort]="2000000 8" [sieve]="20000000 12" [recurse]="42" [matmul]="900 6"
	[fft]="20 8" [hash]="1500000" [interp]="800000" [chase]="2000000 4")
workloads=${WORKLOADS:-"hash interp"}
runs=${RUNS:-7}
builds="base instr sample-raw sample-repaired"
out=$PWD/out/pgo
mkdir -p "$out"

for w in $workloads; do
	d=$out/$w
	rm -rf "$d"
	mkdir -p "$d"
	src=workloads/$w.c
	args=${native[$w]}
	echo "== $w ($args): building"
	clang-14 -O2 "$src" -o "$d/base" -lm
	clang-14 -O2 -fprofile-instr-generate "$src" -o "$d/instr-gen" -lm
	# shellcheck disable=SC2086
	LLVM_PROFILE_FILE=$d/instr.profraw "$d/instr-gen" $args >/dev/null
	llvm-profdata-14 merge -o "$d/instr.profdata" "$d/instr.profraw"
	clang-14 -O2 -fprofile-instr-use="$d/instr.profdata" "$src" -o "$d/instr" -lm

	clang-14 -O2 -g -fdebug-info-for-profiling -S -emit-llvm "$src" -o "$d/$w.ll"
	# shellcheck disable=SC2086
	scripts/sample.sh "$w" "$d/$w.ll" "$d" $args
	bin/reestimate --ir "$d/$w.ll" --format llvm-text "$d/$w.profd" -o "$d/repaired.prof.txt" 2>/dev/null
	bin/reestimate --raw --ir "$d/$w.ll" --format llvm-text "$d/$w.profd" -o "$d/raw.prof.txt" 2>/dev/null
	for v in raw repaired; do
		clang-14 -O2 -g -fdebug-info-for-profiling -fprofile-sample-use="$d/$v.prof.txt" "$src" -o "$d/sample-$v" -lm
	done
done

median() { sort -n | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

echo "== timing: $runs interleaved rounds per workload under flock /tmp/profd-bench.lock (the machine may be shared)"
printf '| workload | %s | instr gain recovered: raw | repaired |\n' "$(echo $builds | sed 's/ / | /g')"
echo "|---|---|---|---|---|---|---|"
for w in $workloads; do
	d=$out/$w
	args=${native[$w]}
	for b in $builds; do : >"$d/$b.times"; done
	flock /tmp/profd-bench.lock bash -c '
		d=$1 runs=$2 args=$3 builds=$4
		TIMEFORMAT=%3U
		for r in $(seq "$runs"); do
			for b in $builds; do
				{ time "$d/$b" $args >/dev/null; } 2>>"$d/$b.times"
			done
		done' _ "$d" "$runs" "$args" "$builds"
	declare -A med=()
	for b in $builds; do med[$b]=$(median <"$d/$b.times"); done
	awk -v w="$w" -v b="${med[base]}" -v i="${med[instr]}" -v r="${med[sample-raw]}" -v p="${med[sample-repaired]}" 'BEGIN {
		gain = b - i
		printf "| %s | %.3f s (1.000) | %.3f | %.3f | %.3f | %s | %s |\n", w, b, i / b, r / b, p / b,
			(gain > 0 ? sprintf("%.0f %%", 100 * (b - r) / gain) : "n/a (no gain)"),
			(gain > 0 ? sprintf("%.0f %%", 100 * (b - p) / gain) : "n/a (no gain)")
	}'
done
echo "make pgo-demo: builds, profiles and per-run times are in out/pgo/WORKLOAD/"
