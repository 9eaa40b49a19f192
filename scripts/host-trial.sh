#!/usr/bin/env bash
# scripts/host-trial.sh [DURATION]: profd --all on a busy host for DURATION (default 3m), as
# an operator runs it: beside node (a function compiled every round, and a hot loop), a JVM
# asked for its perf map, Erlang's JIT and a shell loop of short processes, all at once.
# It prints what profd cost (CPU, RSS, the Go heap live at its peak) and what it named, and
# leaves profd's outputs and log in its work directory. Needs root, bin/profd, node, java,
# javac, erl and erlc. PROFD=path runs another build of profd (to compare two).
set -euo pipefail
duration=${1:-3m}
root=$(cd "$(dirname "$0")/.." && pwd)
profd=${PROFD:-$root/bin/profd}
work=$(mktemp -d /tmp/profd-host-trial.XXXXXX)
case $duration in
*m) secs=$((${duration%m} * 60)) ;;
*s) secs=${duration%s} ;;
*) echo "host-trial: DURATION is seconds or minutes (90s, 3m), not $duration" >&2; exit 2 ;;
esac
load=$((secs + 30))

pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	for p in "${pids[@]}"; do rm -f "/tmp/perf-$p.map" "/tmp/.java_pid$p"; done
}
trap cleanup EXIT

cp "$root/workloads/runtimes/Hot.java" "$root/daemon/testdata/hot.erl" "$work/"
(cd "$work" && javac Hot.java && erlc hot.erl)
cd "$work"
node --perf-basic-prof "$root/workloads/runtimes/churn.js" >/dev/null 2>&1 &
pids+=($!)
node --perf-basic-prof "$root/workloads/runtimes/hot.js" "$load" >/dev/null 2>&1 &
pids+=($!)
java -XX:+PreserveFramePointer Hot "$load" >/dev/null 2>&1 &
pids+=($!)
erl +JPperf map -noshell -s hot main "$load" -s init stop >/dev/null 2>&1 &
pids+=($!)
(while :; do sh -c 'i=0; while [ $i -lt 3000 ]; do i=$((i+1)); done'; sleep 0.05; done) >/dev/null 2>&1 &
pids+=($!)
sleep 1

GODEBUG=gctrace=1 "$profd" --all --out "$work/out" --flush-interval 10s --java-perfmap 30s \
	--duration "$duration" --event cpu-clock >"$work/profd.out" 2>"$work/profd.err" &
p=$!
rss=() hwm=0 ticks=0
while kill -0 "$p" 2>/dev/null; do
	sleep 5
	status=$(cat "/proc/$p/status" 2>/dev/null) || break
	rss+=("$(awk '/^VmRSS/{print int($2/1024)}' <<<"$status")")
	hwm=$(awk '/^VmHWM/{print int($2/1024)}' <<<"$status")
	stat=$(cat "/proc/$p/stat" 2>/dev/null) || break
	stat=${stat##*) }
	read -ra f <<<"$stat"
	ticks=$((f[11] + f[12]))
done
status=0
wait "$p" || status=$?

hz=$(getconf CLK_TCK)
live=$(awk '/^gc /{split($11, a, "->"); if (a[3] + 0 > m) m = a[3] + 0} END {print m + 0}' "$work/profd.err")
last=("${rss[@]}")
((${#last[@]} <= 12)) || last=("${last[@]: -12}")
echo "profd $duration --all (exit $status): CPU $(awk -v t="$ticks" -v h="$hz" -v s="$secs" 'BEGIN{printf "%.1f s, %.0f %% of a core", t/h, 100*t/h/s}')"
echo "RSS in the last minute: ${last[*]} MB; peak RSS (VmHWM) $hwm MB; Go heap live at its peak $live MB"
grep -o 'took=[0-9.]*[mµ]*s' "$work/profd.err" | tail -1 | sed 's/^took=/stop took /'
grep -o 'samples [0-9]* in JIT code, [0-9]* outside; [0-9]* in JIT memory unnamed yet' "$work/profd.err" | tail -1
echo "outputs and log: $work"
