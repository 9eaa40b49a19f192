#!/usr/bin/env bash
# scripts/perf-shares.sh NAME IR ARGS...: the JIT functions' shares of samples as
# `perf record -e cpu-clock -F 999` + `perf inject --jit` sees them (lli-14 -jit-kind=mcjit
# -mcpu=x86-64), one "function percent" line each, for the function-level comparison with
# profd's shares (docs/accuracy.md). Needs root.
set -euo pipefail
name=$1 ir=$(readlink -f "$2")
shift 2
d=$PWD/out/accuracy/perf/$name
rm -rf "$d"
mkdir -p "$d"
cd "$d"
JITDUMPDIR=$d perf record -q -e cpu-clock -F 999 -k 1 -o perf.data \
	lli-14 -jit-kind=mcjit -mcpu=x86-64 "$ir" "$@" >/dev/null 2>perf.log
perf inject --jit -i perf.data -o perf.jit.data 2>>perf.log
# JIT functions are the symbols of the jitted-PID-N.so objects perf inject wrote.
perf report -i perf.jit.data --sort dso,sym --stdio 2>>perf.log |
	awk '$2 ~ /^jitted-/ { sub(/%/, "", $1); print $4, $1 }'
