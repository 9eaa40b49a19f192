#!/usr/bin/env bash
# scripts/sample.sh NAME IR OUTDIR [ARGS...]: run `lli-14 -jit-kind=mcjit -mcpu=x86-64 IR ARGS`
# under profd (cpu-clock at its default 999 Hz) and leave profd's capture and LLVM profiles
# in OUTDIR as NAME.profd, NAME.prof.txt, NAME.prof.extbinary. Needs root and bin/profd.
#
# PARTS=N also splits the run into N parts of about equal CPU time, one interval capture of
# profd's --flush-interval each, left as OUTDIR/NAME.parts/1.profd … N.profd beside the whole
# run's capture NAME.profd. The run is timed once without profd first; under profd lli-14
# starts just after a timer flush, and is stopped (SIGSTOP) at each N-th of that CPU time
# until the next timer flush has ended the interval, then continued. A stopped process draws
# no cpu-clock samples, so the parts split the run's samples and nothing else changes.
set -euo pipefail
name=$1 ir=$2 out=$3
shift 3
parts=${PARTS:-0}
mkdir -p "$out"
out=$(cd "$out" && pwd)
run=$out/$name.sample
rm -rf "$run"
mkdir -p "$run/jitdump"

cmd=(lli-14 -jit-kind=mcjit -mcpu=x86-64 "$ir" "$@")

# cpu_ticks PID: the process's user+system CPU time in clock ticks (empty once it is gone).
cpu_ticks() {
	local stat
	stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
	stat=${stat##*) }
	read -ra f <<<"$stat"
	echo $((f[11] + f[12])) # utime and stime, fields 14 and 15 of stat
}

# flushes: how many flush summaries profd has printed so far.
flushes() { grep -c '^profd flush #' "$run/profd.stdout" || true; }

flagv=()
if [ "$parts" -gt 0 ]; then
	# Time the run alone: CPU ticks (the parts' measure) and wall time (for the flush period).
	t0=$(date +%s%N)
	"${cmd[@]}" >/dev/null &
	pre=$! total=0
	trap 'kill "$pre" 2>/dev/null || true' EXIT
	while kill -0 "$pre" 2>/dev/null; do
		t=$(cpu_ticks "$pre")
		[ -n "$t" ] && total=$t
		sleep 0.01
	done
	wait "$pre"
	trap - EXIT
	wall_ms=$((($(date +%s%N) - t0) / 1000000))
	part_ticks=$((total / parts))
	[ "$part_ticks" -gt 0 ] || { echo "sample.sh: $name ran for $total clock ticks: too short to split in $parts" >&2; exit 1; }
	# The flush period leaves room for a part to take twice its share of wall time.
	period_ms=$((2 * wall_ms / parts + 500))
	[ "$period_ms" -ge 1000 ] || period_ms=1000
	flagv=(--flush-interval "${period_ms}ms")
fi

bin/profd --jit-image lli --out "$run" --fifo-dir "$run/fifo" --jitdump-dir "$run/jitdump" \
	"${flagv[@]}" --log-level warn >"$run/profd.stdout" 2>"$run/profd.log" &
profd=$!
pid=""
cleanup() {
	[ -n "$pid" ] && kill -CONT "$pid" 2>/dev/null
	kill "$profd" 2>/dev/null || true
}
trap cleanup EXIT
for _ in $(seq 100); do [ -e "$run/fifo/profd.pid" ] && break; sleep 0.1; done
[ -e "$run/fifo/profd.pid" ] || { echo "sample.sh: profd did not start:" >&2; cat "$run/profd.log" >&2; exit 1; }

if [ "$parts" -gt 0 ]; then
	# Start just after a timer flush, so that the first part is whole in its interval.
	n=$(flushes)
	while [ "$(flushes)" -eq "$n" ]; do sleep 0.01; done
fi
JITDUMPDIR=$run/jitdump "${cmd[@]}" >/dev/null &
pid=$!
if [ "$parts" -gt 0 ]; then
	for ((k = 1; k < parts; k++)); do
		n=$(flushes)
		while :; do
			t=$(cpu_ticks "$pid")
			[ -z "$t" ] || [ "$t" -ge $((k * part_ticks)) ] && break
			sleep 0.01
		done
		[ -n "$t" ] || { echo "sample.sh: $name exited before its part $k ended: fewer than $parts parts" >&2; break; }
		kill -STOP "$pid"
		[ "$(flushes)" -eq "$n" ] || echo "sample.sh: $name: part $k ran past a timer flush; its samples are in two intervals" >&2
		while [ "$(flushes)" -eq "$n" ]; do sleep 0.01; done
		kill -CONT "$pid"
	done
fi
wait "$pid"
lli=$pid
pid=""
sleep 0.5 # profd notices the exit and writes the process's final profile
kill -TERM "$profd"
wait "$profd"
trap - EXIT
for ext in profd prof.txt prof.extbinary; do
	f=$run/lli-$lli.$ext
	[ -s "$f" ] || { echo "sample.sh: profd wrote no $f" >&2; cat "$run/profd.log" >&2; exit 1; }
	cp "$f" "$out/$name.$ext"
done
if [ "$parts" -gt 0 ]; then
	rm -rf "$out/$name.parts"
	mkdir -p "$out/$name.parts"
	k=0
	# The interval files' names sort as their starts do; the latest links are left out.
	for f in "$run/intervals/lli-$lli".2*.profd; do
		k=$((k + 1))
		cp "$f" "$out/$name.parts/$k.profd"
	done
	[ "$k" -eq "$parts" ] || echo "sample.sh: $name: $k interval captures, not $parts" >&2
fi
