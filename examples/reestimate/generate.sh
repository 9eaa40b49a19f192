#!/usr/bin/env bash
# Regenerates score.json: compiles score.ll with llc-14, links it with main.c, samples the run
# with perf (cpu-clock, so it works without a hardware PMU) and writes score()'s code bytes and
# per-instruction sample counts in the format of docs/reestimate-json.md. Needs llc-14,
# clang-14, perf and python3; run it from anywhere.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
llc-14 -O2 -filetype=obj -o "$work/score.o" "$here/score.ll"
clang-14 -O1 -no-pie -o "$work/score" "$here/main.c" "$work/score.o"
perf record -q -e cpu-clock -c 50000 -o "$work/perf.data" "$work/score" 20000 >/dev/null
perf script -i "$work/perf.data" -F ip,sym 2>/dev/null | awk '$2 == "score" { print $1 }' >"$work/ips"
python3 - "$work/score" "$work/ips" >"$here/score.json" <<'PY'
import json, subprocess, sys
exe, ips = sys.argv[1], sys.argv[2]
syms = subprocess.run(["llvm-nm-14", "--print-size", exe], capture_output=True, text=True, check=True).stdout
addr, size = next((int(a, 16), int(s, 16)) for a, s, _, n in (l.split() for l in syms.splitlines() if len(l.split()) == 4) if n == "score")
# Map the address to a file offset through the program headers of the non-PIE executable.
hdrs = subprocess.run(["llvm-readelf-14", "-lW", exe], capture_output=True, text=True, check=True).stdout
for line in hdrs.splitlines():
    f = line.split()
    if f and f[0] == "LOAD":
        off, vaddr, filesz = int(f[1], 16), int(f[2], 16), int(f[4], 16)
        if vaddr <= addr < vaddr + filesz:
            break
with open(exe, "rb") as fh:
    fh.seek(off + addr - vaddr)
    code = fh.read(size)
counts = {}
for ip in open(ips).read().split():
    a = int(ip, 16)
    counts[a] = counts.get(a, 0) + 1
doc = {"version": 1, "functions": [{
    "name": "score", "addr": hex(addr), "code": code.hex(),
    "samples": {hex(a): c for a, c in sorted(counts.items())},
}]}
json.dump(doc, sys.stdout, indent=2)
print()
PY
echo "wrote $here/score.json" >&2
