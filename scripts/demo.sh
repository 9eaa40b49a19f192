#!/usr/bin/env bash
# The main job: run a real JIT workload (examples/workload/hot.c, compiled to IR and run by
# lli-14) under profd, let the JIT'd program ask for flushes with SIGUSR1, print the hot JIT
# functions, write the LLVM (text, ext-binary), pprof and capture outputs, check them with
# the LLVM tools and reestimate the capture offline. Everything lands in out/demo/.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" -ne 0 ]; then
	echo "make demo: profd samples other processes and needs root (BPF, perf events); run it as root" >&2
	exit 1
fi

out=$PWD/out/demo
rm -rf "$out"
mkdir -p "$out/jitdump"
fifo_dir=$out/run # profd's private directory: profd.pid and the FIFOs JITs write to

echo "== compiling the workload to IR (clang-14 -O2 -g -fdebug-info-for-profiling)"
clang-14 -O2 -g -fdebug-info-for-profiling -S -emit-llvm examples/workload/hot.c -o "$out/hot.ll"

echo "== starting profd --jit-image lli"
bin/profd --jit-image lli --out "$out" --fifo-dir "$fifo_dir" --jitdump-dir "$out/jitdump" \
	--log-level warn >"$out/profd.stdout" 2>"$out/profd.log" &
profd=$!
cleanup() { kill "$profd" 2>/dev/null || true; }
trap cleanup EXIT
for _ in $(seq 50); do [ -e "$fifo_dir/profd.pid" ] && break; sleep 0.1; done
[ -e "$fifo_dir/profd.pid" ] || { echo "profd did not start:" >&2; cat "$out/profd.log" >&2; exit 1; }

echo "== running the JIT: lli-14 -jit-kind=mcjit hot.ll (it sends SIGUSR1 to profd every 100 rounds)"
JITDUMPDIR=$out/jitdump PROFD_DIR=$fifo_dir lli-14 -jit-kind=mcjit "$out/hot.ll" 300 100 &
lli=$!
wait "$lli"
sleep 0.5 # the watcher notices the exit and writes the process's final profile
kill -TERM "$profd"
wait "$profd"
trap - EXIT

echo
echo "== what profd printed (start, and its last flush: the hot JIT functions)"
grep -E '^profd: (sampling|attached)' "$out/profd.stdout" | grep -E "sampling|pid $lli " || true
awk '/^profd (final )?flush/ { block = "" } { block = block $0 "\n" } END { printf "%s", block }' "$out/profd.stdout" \
	| grep -v '^profd: ' || true
[ -s "$out/profd.log" ] && { echo "-- profd warnings:"; cat "$out/profd.log"; }

base=$out/lli-$lli
for f in "$base.prof.txt" "$base.prof.extbinary" "$base.pb.gz" "$base.profd"; do
	[ -s "$f" ] || { echo "make demo: profd wrote no $f" >&2; exit 1; }
done
echo
echo "== outputs in out/demo/: $(cd "$out" && ls lli-"$lli".*)"

echo
echo "== llvm-profdata-14 show --sample (the text profile; top functions)"
llvm-profdata-14 show --sample "$base.prof.txt" | grep '^Function:' | sort -t: -k3 -nr | head -5
echo "== llvm-profdata-14 show --sample (the ext-binary profile reads the same)"
if diff <(llvm-profdata-14 show --sample "$base.prof.txt") <(llvm-profdata-14 show --sample "$base.prof.extbinary") >/dev/null; then
	echo "identical"
else
	echo "make demo: the text and ext-binary profiles differ" >&2
	exit 1
fi

echo
echo "== go tool pprof -top (the pprof profile)"
go tool pprof -top "$base.pb.gz" 2>/dev/null | head -12

echo
echo "== reestimate the capture offline: bin/reestimate $(basename "$base").profd -o reestimated.txt"
bin/reestimate "$base.profd" -o "$out/reestimated.txt"
llvm-profdata-14 show --sample "$out/reestimated.txt" | grep '^Function:' | sort -t: -k3 -nr | head -5
echo
echo "make demo: done; everything is in out/demo/"
