#!/usr/bin/env bash
# make reopt-demo: a JIT closes the loop in-process (docs/accuracy.md, docs/jit-runtime.md).
# For each workload (WORKLOADS, default "hash interp"), bin/reopt runs the workload's IR
# (clang-14 -O2 -Xclang -disable-llvm-passes -g -fdebug-info-for-profiling: the IR clang's
# -O2 front end hands to LLVM, before any pass) under one profd (--jit-image reopt,
# --freq 999), each run WARMUP iterations, then ITERATIONS more, in four modes:
#   profile  tier 1 (-O2, no inlining), profd's profile over the FIFO, -O2 with that profile
#   plain    the same recompilation without a profile (the control)
#   instr    IR-level instrumentation PGO of the same IR done offline (clang-14 -O2
#            -fprofile-generate, one run, llvm-profdata-14 merge, clang-14 -O2
#            -fprofile-use -S -emit-llvm), run as given: code generation only
#   instr-fe front-end instrumentation PGO, as make pgo-demo does it, of the same source (clang-14
#            -O2 -fprofile-instr-generate, one run, clang-14 -O2 -fprofile-instr-use -S
#            -emit-llvm; front-end instrumentation needs the C source, not IR), run the same way
#   o2       clang-14 -O2 -S -emit-llvm of the same IR, run as given (checks that the JIT's
#            own -O2 matches clang's)
# in interleaved rounds (ROUNDS, default 5) under flock /tmp/profd-bench.lock, and prints the
# median CPU time of an iteration after re-optimisation (the iterations after the warm-up in
# instr and o2), each as a ratio to plain, and the share of instrumentation PGO's gain over
# plain that profd's profile recovers, against each instrumentation. Then the slowdown
# profd's sampling costs the JIT: OVERHEAD_ROUNDS (default 7) interleaved pairs of plain runs,
# with profd (--freq 999) sampling the JIT and without (the same binary under another name,
# which profd's --jit-image does not match, while profd runs).
# Needs root (profd samples).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" -ne 0 ]; then
	echo "make reopt-demo: profd samples other processes and needs root; run it as root" >&2
	exit 1
fi
# Per iteration ~0.2 s once re-optimised.
declare -A size=([hash]="300000" [interp]="300000" [sort]="3000000 1" [sieve]="20000000 3"
	[recurse]="39" [matmul]="600 3" [fft]="18 6" [chase]="400000 3")
workloads=${WORKLOADS:-"hash interp"}
rounds=${ROUNDS:-5}
overhead_rounds=${OVERHEAD_ROUNDS:-7}
warmup=${WARMUP:-8}
iterations=${ITERATIONS:-8}
modes="profile plain instr instr-fe o2"
out=$PWD/out/reopt
mkdir -p "$out"
cp bin/reopt "$out/reopt-bare" # the same JIT under a name profd's --jit-image reopt does not match

for w in $workloads; do
	d=$out/$w
	rm -rf "$d"
	mkdir -p "$d/runs"
	src=workloads/$w.c
	args=${size[$w]}
	echo "== $w ($args): IR and instrumentation PGO"
	clang-14 -O2 -Xclang -disable-llvm-passes -g -fdebug-info-for-profiling -S -emit-llvm "$src" -o "$d/$w.ll"
	clang-14 -O2 -fprofile-generate "$d/$w.ll" -o "$d/instr-gen" -lm
	# shellcheck disable=SC2086
	LLVM_PROFILE_FILE=$d/instr.profraw "$d/instr-gen" $args >/dev/null
	llvm-profdata-14 merge -o "$d/instr.profdata" "$d/instr.profraw"
	clang-14 -O2 -fprofile-use="$d/instr.profdata" -S -emit-llvm "$d/$w.ll" -o "$d/instr.ll"
	clang-14 -O2 -fprofile-instr-generate "$src" -o "$d/instr-fe-gen" -lm
	# shellcheck disable=SC2086
	LLVM_PROFILE_FILE=$d/instr-fe.profraw "$d/instr-fe-gen" $args >/dev/null
	llvm-profdata-14 merge -o "$d/instr-fe.profdata" "$d/instr-fe.profraw"
	clang-14 -O2 -fprofile-instr-use="$d/instr-fe.profdata" -g -fdebug-info-for-profiling -S -emit-llvm "$src" \
		-o "$d/instr-fe.ll"
	clang-14 -O2 -S -emit-llvm "$d/$w.ll" -o "$d/o2.ll"
done

# reopt_run MODE OUT: one bin/reopt run of workload $w in directory $d.
reopt_run() {
	local mode=$1 log=$2 ir=$d/$w.ll flags=(--mode profile) jit=bin/reopt wait=3000
	case $mode in
	plain) flags=(--mode plain) ;;
	bare) flags=(--mode plain) jit=$out/reopt-bare wait=0 ;;
	instr | instr-fe | o2) flags=(--mode static) ir=$d/$mode.ll ;;
	esac
	# shellcheck disable=SC2086
	"$jit" "${flags[@]}" --profd-dir "$d/fifo" --wait-ms "$wait" --warmup "$warmup" \
		--iterations "$iterations" "$ir" ${size[$w]} >"$log" 2>&1
}

# start_profd: profd for every reopt process of this workload's runs.
start_profd() {
	bin/profd --jit-image reopt --freq 999 --out "$d/prof" --fifo-dir "$d/fifo" --log-level warn \
		>"$d/profd.stdout" 2>>"$d/profd.log" &
	profd=$!
	for _ in $(seq 100); do [ -e "$d/fifo/profd.pid" ] && return; sleep 0.1; done
	echo "reopt-demo: profd did not start:" >&2
	cat "$d/profd.log" >&2
	exit 1
}
stop_profd() {
	kill -TERM "$profd"
	wait "$profd" || true
}

# after_times LOG...: the CPU ms of every iteration after re-optimisation.
after_times() { grep -h '^reopt iteration phase=after' "$@" | sed 's/.*cpu_ms=\([0-9.]*\).*/\1/'; }
all_times() { grep -h '^reopt iteration' "$@" | sed 's/.*cpu_ms=\([0-9.]*\).*/\1/'; }
median() { sort -n | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

# check_run LOG: the run ended with its summary and every iteration printed the same result.
check_run() {
	grep -q '^reopt summary' "$1" || { echo "reopt-demo: run failed ($1):" >&2; tail -5 "$1" >&2; exit 1; }
	local results
	results=$(grep -v '^reopt ' "$1" | sort -u | wc -l)
	[ "$results" -le 1 ] || { echo "reopt-demo: iterations disagree in $1" >&2; exit 1; }
}

echo "== timing: $rounds interleaved rounds per workload ($warmup + $iterations iterations a run)" \
	"under flock /tmp/profd-bench.lock (the machine may be shared)"
export -f reopt_run start_profd stop_profd
table=$out/table.md
{
	echo "| workload | before (tier 1) | plain | profd | instr (IR) | instr (front end) | clang -O2 | gain recovered: of instr (IR) | of instr (front end) |"
	echo "|---|---|---|---|---|---|---|---|---|"
} >"$table"
for w in $workloads; do
	d=$out/$w
	flock /tmp/profd-bench.lock bash -c '
		set -euo pipefail
		w=$1 d=$2 rounds=$3 modes=$4 warmup=$5 iterations=$6 out=$8
		declare -A size=([$w]="$7")
		start_profd
		for r in $(seq "$rounds"); do
			for m in $modes; do reopt_run "$m" "$d/runs/$m.$r.log"; done
		done
		stop_profd' _ "$w" "$d" "$rounds" "$modes" "$warmup" "$iterations" "${size[$w]}" "$out"
	declare -A med=()
	for m in $modes; do
		for f in "$d"/runs/"$m".*.log; do check_run "$f"; done
		med[$m]=$(after_times "$d"/runs/"$m".*.log | median)
	done
	before=$(grep -h '^reopt iteration phase=before' "$d"/runs/profile.*.log "$d"/runs/plain.*.log |
		sed 's/.*cpu_ms=\([0-9.]*\).*/\1/' | median)
	awk -v w="$w" -v t1="$before" -v pl="${med[plain]}" -v pr="${med[profile]}" -v i="${med[instr]}" \
		-v f="${med[instr-fe]}" -v o="${med[o2]}" '
		# recovered: the share of the gain an instrumentation build makes over plain that the profile
		# gets, where that gain is at least 5 %
		function recovered(x) {
			if (pl - x < 0.05 * pl)
				return sprintf("n/a (it gains %.1f %%)", 100 * (pl - x) / pl)
			return sprintf("%.0f %%", 100 * (pl - pr) / (pl - x))
		}
		BEGIN {
			printf "| %s | %.1f ms (%.3f) | %.1f ms (1.000) | %.3f | %.3f | %.3f | %.3f | %s | %s |\n", w, t1,
				t1 / pl, pl, pr / pl, i / pl, f / pl, o / pl, recovered(i), recovered(f)
		}' | tee -a "$table"
done

echo "== profd's cost to the JIT: $overhead_rounds interleaved pairs of plain runs, with profd at 999 Hz and without"
otable=$out/overhead.md
{
	echo "| workload | without profd | with profd (999 Hz) | slowdown |"
	echo "|---|---|---|---|"
} >"$otable"
for w in $workloads; do
	d=$out/$w
	flock /tmp/profd-bench.lock bash -c '
		set -euo pipefail
		w=$1 d=$2 rounds=$3 warmup=$4 iterations=$5 out=$7
		declare -A size=([$w]="$6")
		start_profd
		for r in $(seq "$rounds"); do
			reopt_run bare "$d/runs/bare.$r.log"
			reopt_run plain "$d/runs/sampled.$r.log"
		done
		stop_profd' _ "$w" "$d" "$overhead_rounds" "$warmup" "$iterations" "${size[$w]}" "$out"
	for f in "$d"/runs/bare.*.log "$d"/runs/sampled.*.log; do check_run "$f"; done
	grep -q '^reopt profd absent' "$d"/runs/bare.1.log || { echo "reopt-demo: profd sampled the bare run" >&2; exit 1; }
	grep -q '^reopt profd connected' "$d"/runs/sampled.1.log || { echo "reopt-demo: profd missed the sampled run" >&2; exit 1; }
	bare=$(all_times "$d"/runs/bare.*.log | median)
	sampled=$(all_times "$d"/runs/sampled.*.log | median)
	awk -v w="$w" -v b="$bare" -v s="$sampled" 'BEGIN {
		printf "| %s | %.1f ms | %.1f ms | %+.1f %% |\n", w, b, s, 100 * (s - b) / b }' | tee -a "$otable"
done
echo "make reopt-demo: IR, profiles and per-run logs are in out/reopt/WORKLOAD/; tables in out/reopt/{table,overhead}.md"
