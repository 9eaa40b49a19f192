#!/usr/bin/env bash
# scripts/sample.sh NAME IR OUTDIR [ARGS...]: run `lli-14 -jit-kind=mcjit -mcpu=x86-64 IR ARGS`
# under profd (cpu-clock at its default 999 Hz) and leave profd's capture and LLVM profiles
# in OUTDIR as NAME.profd, NAME.prof.txt, NAME.prof.extbinary. Needs root and bin/profd.
set -euo pipefail
name=$1 ir=$2 out=$3
shift 3
mkdir -p "$out"
out=$(cd "$out" && pwd)
run=$out/$name.sample
rm -rf "$run"
mkdir -p "$run/jitdump"
bin/profd --jit-image lli --out "$run" --fifo-dir "$run/fifo" --jitdump-dir "$run/jitdump" \
	--log-level warn >"$run/profd.stdout" 2>"$run/profd.log" &
profd=$!
cleanup() { kill "$profd" 2>/dev/null || true; }
trap cleanup EXIT
for _ in $(seq 100); do [ -e "$run/fifo/profd.pid" ] && break; sleep 0.1; done
[ -e "$run/fifo/profd.pid" ] || { echo "sample.sh: profd did not start:" >&2; cat "$run/profd.log" >&2; exit 1; }
JITDUMPDIR=$run/jitdump lli-14 -jit-kind=mcjit -mcpu=x86-64 "$ir" "$@" >/dev/null &
lli=$!
wait "$lli"
sleep 0.5 # profd notices the exit and writes the process's final profile
kill -TERM "$profd"
wait "$profd"
trap - EXIT
for ext in profd prof.txt prof.extbinary; do
	f=$run/lli-$lli.$ext
	[ -s "$f" ] || { echo "sample.sh: profd wrote no $f" >&2; cat "$run/profd.log" >&2; exit 1; }
	cp "$f" "$out/$name.$ext"
done
